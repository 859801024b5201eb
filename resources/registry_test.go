package resources

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

type props struct {
	Content string `json:"content"`
	Mode    string `json:"mode,omitempty"`
	Force   bool   `json:"force"`
}

type decoded struct {
	props
	name string
}

func (d *decoded) Validate() error {
	if d.Mode == "bad" {
		return errors.New("mode: invalid")
	}
	return nil
}

func (d *decoded) CheckApply(context.Context, *Env, bool) (Result, error) { return Result{}, nil }

func newDecoded(spec Spec) (Resource, error) {
	d := &decoded{name: spec.Name}
	if err := DecodeProperties(spec.Properties, &d.props); err != nil {
		return nil, err
	}
	return d, nil
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.Register("thing", newDecoded)
	r.Register("another", newDecoded)
	if got := r.Types(); !slices.Equal(got, []string{"another", "thing"}) {
		t.Fatalf("Types() = %v", got)
	}

	res, err := r.New(Spec{Type: "thing", Name: "a", Properties: map[string]any{"content": "x", "force": true}})
	if err != nil {
		t.Fatal(err)
	}
	if d := res.(*decoded); d.Content != "x" || !d.Force || d.name != "a" {
		t.Fatalf("decoded %+v", d)
	}

	_, err = r.New(Spec{Type: "nope", Name: "a"})
	if !errors.Is(err, ErrUnknownType) || err.Error() != `nope#a: unknown resource type "nope"` {
		t.Fatalf("unknown type: %v", err)
	}

	_, err = r.New(Spec{Type: "thing", Name: "b", Properties: map[string]any{"mode": "bad"}})
	if err == nil || err.Error() != "thing#b: mode: invalid" {
		t.Fatalf("validate: %v", err)
	}

	_, err = r.New(Spec{Type: "thing", Name: "c", Properties: map[string]any{"mdoe": "0644"}})
	if err == nil || err.Error() != `thing#c: unknown property "mdoe"` {
		t.Fatalf("unknown property: %v", err)
	}
}

func TestRegisterDuplicatePanics(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.Register("thing", newDecoded)
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), `"thing" registered twice`) {
			t.Fatalf("recovered %v", p)
		}
	}()
	r.Register("thing", newDecoded)
}

func TestDecodeProperties(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		props map[string]any
		err   string
		want  props
	}{
		{name: "nil", props: nil},
		{name: "ok", props: map[string]any{"content": "c", "mode": "0644"}, want: props{Content: "c", Mode: "0644"}},
		{name: "unknown", props: map[string]any{"owner": "root"}, err: `unknown property "owner"`},
		{name: "wrong type", props: map[string]any{"mode": 644}, err: `property "mode": expected string, got number`},
		{name: "wrong bool", props: map[string]any{"force": "yes"}, err: `property "force": expected bool, got string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got props
			err := DecodeProperties(tt.props, &got)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("err %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
}

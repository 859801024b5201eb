package resources

import (
	"errors"
	"reflect"
	"testing"

	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

func TestRenderSpec(t *testing.T) {
	t.Parallel()
	scope := template.Scope{Data: map[string]any{"port": 8080, "state": "absent"}}
	r := schemas.Resource{
		Type:       "file",
		Name:       "/etc/app.conf",
		Ensure:     "{{ lookup('data.state') }}",
		Properties: map[string]any{"content": "port={{ lookup('data.port') }}\n", "mode": "0644"},
	}
	spec, err := RenderSpec(r, scope)
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{Type: "file", Name: "/etc/app.conf", Ensure: "absent",
		Properties: map[string]any{"content": "port=8080\n", "mode": "0644"}}
	if !reflect.DeepEqual(spec, want) {
		t.Fatalf("spec %+v, want %+v", spec, want)
	}

	r.Properties["content"] = "{{ lookup('data.missing') }}"
	_, err = RenderSpec(r, scope)
	var mk *template.MissingKeyError
	if !errors.As(err, &mk) || err.Error() != `file#/etc/app.conf: content: lookup "data.missing": key not found` {
		t.Fatalf("err %v", err)
	}

	r.Properties = nil
	r.Ensure = "{{ 1 }}"
	if _, err := RenderSpec(r, scope); err == nil || err.Error() != "file#/etc/app.conf: ensure: rendered to int, want a string" {
		t.Fatalf("err %v", err)
	}
}

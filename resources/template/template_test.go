package template

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func testScope() Scope {
	return Scope{
		Data: map[string]any{
			"port":    8080,
			"ratio":   0.5,
			"jsonnum": float64(9000),
			"name":    "app",
			"enabled": true,
			"servers": []any{"a.example", "b.example"},
			"db":      map[string]any{"host": "db1", "opts": map[string]any{"tls": true}},
			"nothing": nil,
		},
		Facts: map[string]any{
			"host": map[string]any{"info": map[string]any{"platformFamily": "debian"}},
		},
		Environ: map[string]string{"HOME": "/root"},
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want any
	}{
		{"no markers", "plain text", "plain text"},
		{"empty", "", ""},
		{"native int", "{{ lookup('data.port') }}", 8080},
		{"native int dollar", "${ lookup('data.port') }", 8080},
		{"native bool", "{{ lookup('data.enabled') }}", true},
		{"native float", "{{ Data.ratio }}", 0.5},
		{"json number becomes int", "{{ lookup('data.jsonnum') }}", 9000},
		{"native map", "{{ lookup('data.db.opts') }}", map[string]any{"tls": true}},
		{"native list", "${lookup('data.servers')}", []any{"a.example", "b.example"}},
		{"native map literal", `{{ {"a": 1} }}`, map[string]any{"a": 1}},
		{"arithmetic", "{{ lookup('data.port') + 1 }}", 8081},
		{"no spaces", "{{lookup('data.name')}}", "app"},
		{"mixed text", "port={{ lookup('data.port') }}\n", "port=8080\n"},
		{"mixed dollar", "http://${ Data.db.host }:${ Data.port }/", "http://db1:8080/"},
		{"both delimiters", "{{ Data.name }}-${ Data.name }", "app-app"},
		{"mixed map as json", "opts: {{ lookup('data.db.opts') }}", `opts: {"tls":true}`},
		{"mixed list as json", "s={{ Data.servers }}", `s=["a.example","b.example"]`},
		{"mixed nil is empty", "[{{ lookup('data.nothing') }}]", "[]"},
		{"mixed bool", "on={{ Data.enabled }}", "on=true"},
		{"nested facts", "{{ lookup('facts.host.info.platformFamily') }}", "debian"},
		{"lowercase variables", "{{ facts.host.info.platformFamily }}", "debian"},
		{"environ", "{{ lookup('environ.HOME') }}", "/root"},
		{"environ variable", "${ Environ.HOME }", "/root"},
		{"list index", "{{ lookup('data.servers.1') }}", "b.example"},
		{"default used", "{{ lookup('data.missing', 80) }}", 80},
		{"default not used", "{{ lookup('data.port', 80) }}", 8080},
		{"default nil", "x{{ lookup('data.missing', nil) }}x", "xx"},
		{"existing nil", "{{ lookup('data.nothing') }}", nil},
		{"builtin upper", "{{ upper(lookup('data.name')) }}", "APP"},
		{"builtin join", "{{ join(Data.servers, ',') }}", "a.example,b.example"},
		{"closer inside string", `{{ "}}" + Data.name }}`, "}}app"},
		{"brace inside dollar string", `${ "}" }`, "}"},
		{"escaped braces", `\{{ not a template }}`, "{{ not a template }}"},
		{"escaped dollar", `echo \${HOME}`, "echo ${HOME}"},
		{"escaped next to expression", `\${HOME}={{ Environ.HOME }}`, "${HOME}=/root"},
		{"lone dollar and brace", "cost $5 {x} }}", "cost $5 {x} }}"},
		{"single brace", "{ not: template }", "{ not: template }"},
		{"ternary", "{{ Data.port > 8000 ? 'high' : 'low' }}", "high"},
		{"surrounding space is text", " {{ Data.port }}", " 8080"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Render(tt.in, testScope())
			if err != nil {
				t.Fatalf("Render(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Render(%q) = %#v (%T), want %#v (%T)", tt.in, got, got, tt.want, tt.want)
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		check   func(error) bool
		message string
	}{
		{
			name:    "missing key",
			in:      "{{ lookup('data.port2') }}",
			check:   func(err error) bool { var m *MissingKeyError; return errors.As(err, &m) && m.Path == "data.port2" },
			message: `lookup "data.port2": key not found`,
		},
		{
			name:    "missing key in mixed text",
			in:      "port={{ lookup('data.db.port') }}",
			check:   func(err error) bool { var m *MissingKeyError; return errors.As(err, &m) },
			message: `lookup "data.db.port": key not found`,
		},
		{
			name:    "unknown root",
			in:      "{{ lookup('hiera.port') }}",
			check:   func(err error) bool { var m *MissingKeyError; return errors.As(err, &m) },
			message: `lookup "hiera.port": key not found`,
		},
		{
			name:    "index out of range",
			in:      "{{ lookup('data.servers.7') }}",
			check:   func(err error) bool { var m *MissingKeyError; return errors.As(err, &m) },
			message: `lookup "data.servers.7": key not found`,
		},
		{
			name: "unclosed double",
			in:   "port={{ lookup('data.port') }",
			check: func(err error) bool {
				var s *SyntaxError
				return errors.As(err, &s) && s.Offset == 5 && s.Opener == "{{"
			},
			message: `template: "{{" at offset 5 has no closing "}}"`,
		},
		{
			name:    "unclosed dollar",
			in:      "echo ${HOME",
			check:   func(err error) bool { var s *SyntaxError; return errors.As(err, &s) && s.Opener == "${" },
			message: `template: "${" at offset 5 has no closing "}"`,
		},
		{
			name:    "unterminated string",
			in:      "{{ 'abc }}",
			check:   func(err error) bool { var s *SyntaxError; return errors.As(err, &s) },
			message: "has no closing",
		},
		{
			name:    "unknown variable",
			in:      "echo ${HOME}",
			check:   func(err error) bool { var e *ExprError; return errors.As(err, &e) && e.Expr == "HOME" },
			message: `template: expression "HOME": unknown name HOME`,
		},
		{
			name:    "empty expression",
			in:      "a {{ }} b",
			check:   func(err error) bool { var e *ExprError; return errors.As(err, &e) },
			message: "empty expression",
		},
		{
			name:    "too many defaults",
			in:      "{{ lookup('data.x', 1, 2) }}",
			check:   func(err error) bool { var e *ExprError; return errors.As(err, &e) },
			message: "at most one default",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Render(tt.in, testScope())
			if err == nil {
				t.Fatalf("Render(%q): no error", tt.in)
			}
			if !tt.check(err) {
				t.Fatalf("Render(%q): error %T %v is not the expected kind", tt.in, err, err)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Fatalf("Render(%q): error %q does not contain %q", tt.in, err, tt.message)
			}
		})
	}
}

func TestRenderValue(t *testing.T) {
	t.Parallel()
	in := map[string]any{
		"content": "port={{ lookup('data.port') }}\n",
		"port":    "{{ lookup('data.port') }}",
		"count":   3,
		"env":     []any{"A=${ Data.name }", "B=plain"},
		"labels":  map[string]string{"host": "{{ Data.db.host }}"},
		"args":    []string{"{{ Data.enabled }}"},
		"nested":  map[string]any{"deep": []any{map[string]any{"x": "${ Data.ratio }"}}},
	}
	got, err := RenderValue(in, testScope())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"content": "port=8080\n",
		"port":    8080,
		"count":   3,
		"env":     []any{"A=app", "B=plain"},
		"labels":  map[string]any{"host": "db1"},
		"args":    []any{true},
		"nested":  map[string]any{"deep": []any{map[string]any{"x": 0.5}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RenderValue =\n%#v\nwant\n%#v", got, want)
	}
	if in["port"] != "{{ lookup('data.port') }}" {
		t.Fatal("RenderValue modified its input")
	}
}

func TestRenderValueErrorPath(t *testing.T) {
	t.Parallel()
	in := map[string]any{"env": []any{"ok", map[string]any{"v": "{{ lookup('data.nope') }}"}}}
	_, err := RenderValue(in, testScope())
	var pe *PathError
	if !errors.As(err, &pe) || pe.Path != "env.1.v" {
		t.Fatalf("error %v: want a PathError at env.1.v", err)
	}
	var mk *MissingKeyError
	if !errors.As(err, &mk) {
		t.Fatalf("error %v does not wrap MissingKeyError", err)
	}
	if want := `env.1.v: lookup "data.nope": key not found`; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

func TestProgramsAreSharedBetweenScopes(t *testing.T) {
	t.Parallel()
	const e = "{{ lookup('data.who') + '@' + Environ.HOST }}"
	for _, who := range []string{"alice", "bob"} {
		got, err := Render(e, Scope{Data: map[string]any{"who": who}, Environ: map[string]string{"HOST": "h"}})
		if err != nil {
			t.Fatal(err)
		}
		if got != who+"@h" {
			t.Fatalf("got %v, want %s@h", got, who)
		}
	}
	// A nil scope works too: maps default to empty.
	got, err := Render("{{ lookup('data.x', 'd') }}", Scope{})
	if err != nil || got != "d" {
		t.Fatalf("got %v, %v", got, err)
	}
}

func TestHasTemplate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"plain": false, "{x}": false, "$x": false,
		"{{ x }}": true, "${x}": true, `\${x}`: true, "a {{": true,
	} {
		if got := HasTemplate(in); got != want {
			t.Errorf("HasTemplate(%q) = %v, want %v", in, got, want)
		}
	}
}

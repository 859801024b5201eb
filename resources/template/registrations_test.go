package template

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	texttemplate "text/template"
	"time"
)

// regScope answers registrations() from a fixed list, filtering as the
// bus does, and counts the calls.
func regScope(t *testing.T, calls *[][4]string) Scope {
	entries := Registrations{
		{Cluster: "production", Service: "web", Protocol: "http", Address: "10.0.0.1", Port: 8080, Priority: 10,
			Annotations: map[string]string{"prometheus.io/scrape": "true", "version": "1.2.3", "__hidden": "x", "bad-label": "y"}},
		{Cluster: "production", Service: "web", Protocol: "http", Address: "10.0.0.2", Port: 8080, Priority: 20},
		{Cluster: "production", Service: "db", Protocol: "tcp", Address: "10.0.0.3", Port: 5432, Priority: 1},
	}
	s := testScope()
	s.Dir = t.TempDir()
	s.Registrations = func(c, p, sv, a string) (Registrations, error) {
		*calls = append(*calls, [4]string{c, p, sv, a})
		var out Registrations
		for _, e := range entries {
			if (c == "*" || c == e.Cluster) && (p == "*" || p == e.Protocol) && (sv == "*" || sv == e.Service) && (a == "*" || a == e.Address) {
				out = append(out, e)
			}
		}
		return out, nil
	}
	return s
}

// TestRegistrationsInAllEngines: registrations() is callable from expr,
// Jet (CCM's documented backends.cfg.jet, verbatim) and Go templates, and
// its PrometheusFileSD transformer from each.
func TestRegistrationsInAllEngines(t *testing.T) {
	t.Parallel()
	var calls [][4]string
	s := regScope(t, &calls)

	v, err := Render(`{{ map(registrations('production', 'http', 'web', '*'), .Address) }}`, s)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := v.([]any); !ok || len(got) != 2 || got[0] != "10.0.0.1" || got[1] != "10.0.0.2" {
		t.Fatalf("expr: got %#v", v)
	}
	if calls[0] != [4]string{"production", "http", "web", "*"} {
		t.Fatalf("lookup called with %v", calls[0])
	}

	// CCM's registration page, "Full example", backends.cfg.jet.
	jetFile := "backend web_servers\n  balance roundrobin\n" +
		"[[ range _, entry := registrations(\"production\", \"http\", \"web\", \"*\") ]]\n" +
		"  server [[ entry.Address ]] [[ entry.Address ]]:[[ entry.Port ]] check weight [[ 256 - entry.Priority ]]\n" +
		"[[ end ]]\n"
	if err := os.WriteFile(filepath.Join(s.Dir, "backends.cfg.jet"), []byte(jetFile), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err = Render(`{{ template("backends.cfg.jet") }}`, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server 10.0.0.1 10.0.0.1:8080 check weight 246", "server 10.0.0.2 10.0.0.2:8080 check weight 236"} {
		if !strings.Contains(v.(string), want) {
			t.Fatalf("jet: %q lacks %q", v, want)
		}
	}
	if strings.Contains(v.(string), "5432") {
		t.Fatalf("jet: the db entry is not a web one: %q", v)
	}

	tpl, err := texttemplate.New("go").Funcs(s.GoFunctions()).Parse(
		`{{ range $entry := registrations "production" "http" "web" "*" }}server {{ $entry.Address }}:{{ $entry.Port }};{{ end }}`)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ExecuteGo(tpl, &buf, s.Variables(), 1<<20, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "server 10.0.0.1:8080;server 10.0.0.2:8080;" {
		t.Fatalf("go: %q", buf.String())
	}

	// PrometheusFileSD: only the opted-in web entry; valid labels only.
	want := `"targets": [
      "10.0.0.1:8080"
    ]`
	for _, src := range []string{
		`{{ registrations('production', 'http', 'web', '*').PrometheusFileSD() }}`,
		`{{ jet('[[ registrations("production", "http", "web", "*").PrometheusFileSD() ]]') }}`,
	} {
		v, err := Render(src, s)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		out := v.(string)
		if !strings.Contains(out, want) || !strings.Contains(out, `"version": "1.2.3"`) || strings.Contains(out, "__hidden") || strings.Contains(out, "bad-label") {
			t.Fatalf("%s: %s", src, out)
		}
	}
}

// TestRegistrationsErrors: the wrong number of arguments, a scope without
// a lookup (the coordinator's central check) and a failing lookup are
// errors naming the call.
func TestRegistrationsErrors(t *testing.T) {
	t.Parallel()
	if _, err := Render(`{{ registrations('a', 'b', 'c') }}`, testScope()); err == nil || !strings.Contains(err.Error(), "takes 4 arguments") {
		t.Fatalf("3 arguments: %v", err)
	}
	if _, err := Render(`{{ registrations('*', '*', '*', '*') }}`, testScope()); !errors.Is(err, ErrNoRegistrations) {
		t.Fatalf("no lookup: %v", err)
	}
	s := testScope()
	s.Registrations = func(c, p, sv, a string) (Registrations, error) { return nil, errors.New("bus down") }
	_, err := Render(`{{ jet('[[ registrations("production", "*", "*", "*") ]]') }}`, s)
	if err == nil || !strings.Contains(err.Error(), `registrations("production", "*", "*", "*"): bus down`) {
		t.Fatalf("failing lookup: %v", err)
	}
	// Nothing registered is an empty list, not nil.
	s.Registrations = func(c, p, sv, a string) (Registrations, error) { return nil, nil }
	v, err := Render(`{{ len(registrations('*', '*', '*', '*')) }}`, s)
	if err != nil || v != 0 {
		t.Fatalf("empty: %v %v", v, err)
	}
}

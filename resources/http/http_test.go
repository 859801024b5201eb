package http

import (
	"errors"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/conformance"
)

// api is a loopback service with one collection: POST /items creates an
// item (checking the token and body), GET /items/1 finds it, GET /ready
// answers with a configurable status and body; every request is counted.
type api struct {
	*httptest.Server
	mu       sync.Mutex
	items    int
	requests map[string]int
	ready    int
	body     string
}

func newAPI(t *testing.T) *api {
	t.Helper()
	a := &api{requests: map[string]int{}, ready: 200, body: `{"status":"ready"}`}
	a.Server = httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.requests[r.Method+" "+r.URL.Path]++
		switch {
		case r.Method == "POST" && r.URL.Path == "/items":
			b, _ := io.ReadAll(r.Body)
			if r.Header.Get("Authorization") != "Bearer t0k" || string(b) != `{"name":"one"}` {
				nethttp.Error(w, "bad request", nethttp.StatusBadRequest)
				return
			}
			a.items++
			w.WriteHeader(nethttp.StatusCreated)
		case r.Method == "GET" && r.URL.Path == "/items/1":
			if a.items == 0 {
				nethttp.NotFound(w, r)
				return
			}
			fmt.Fprint(w, `{"name":"one"}`)
		case r.URL.Path == "/ready":
			w.WriteHeader(a.ready)
			fmt.Fprint(w, a.body)
		case r.URL.Path == "/hook":
			w.WriteHeader(nethttp.StatusNoContent)
		default:
			nethttp.NotFound(w, r)
		}
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *api) count(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests[key]
}

func build(t *testing.T, props map[string]any) *HTTP {
	t.Helper()
	r, err := New(resources.Spec{Type: Type, Name: "req", Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	return r.(*HTTP)
}

func TestConformanceUnless(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	props := map[string]any{
		"method": "post", "url": a.URL + "/items", "body": `{"name":"one"}`,
		"headers": map[string]any{"Authorization": "Bearer t0k"}, "status": 201,
		"unless": map[string]any{"url": a.URL + "/items/1", "match": `"name":\s*"one"`},
	}
	conformance.Run(t, conformance.Case{
		New: func(t *testing.T) (resources.Resource, *resources.Env) { return build(t, props), nil },
		Snapshot: func(t *testing.T) string {
			a.mu.Lock()
			defer a.mu.Unlock()
			return fmt.Sprintf("%d items", a.items)
		},
	})
	if n := a.count("POST /items"); n != 1 {
		t.Fatalf("%d POSTs, want 1", n)
	}
	// A refresh sends it whatever the guard says.
	out := resources.Execute(t.Context(), build(t, props), &resources.Env{Refresh: true})
	if out.Status != resources.StatusChanged || !out.Refreshed || a.count("POST /items") != 2 {
		t.Fatalf("refresh %+v, %d POSTs", out, a.count("POST /items"))
	}
}

func TestReadiness(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	h := build(t, map[string]any{"url": a.URL + "/ready", "match": `"status":"ready"`, "status": []any{200, 204}})
	for _, noop := range []bool{true, false} {
		out := resources.Execute(t.Context(), h, &resources.Env{Noop: noop})
		if out.Status != resources.StatusStable || out.Message != "GET "+a.URL+"/ready as expected" {
			t.Fatalf("noop %v: %+v", noop, out)
		}
	}
	if n := a.count("GET /ready"); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	a.mu.Lock()
	a.body = `{"status":"starting"}`
	a.mu.Unlock()
	out := resources.Execute(t.Context(), h, &resources.Env{})
	if out.Status != resources.StatusFailed || !errors.Is(out.Err, ErrNoMatch) || !strings.Contains(out.Message, `starting`) {
		t.Fatalf("no match: %+v", out)
	}
	a.mu.Lock()
	a.ready = 503
	a.mu.Unlock()
	out = resources.Execute(t.Context(), h, &resources.Env{})
	if out.Status != resources.StatusFailed || !errors.Is(out.Err, ErrStatus) || !strings.Contains(out.Message, "503, want [200 204]") {
		t.Fatalf("bad status: %+v", out)
	}
}

func TestAlways(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	h := build(t, map[string]any{"method": "POST", "url": a.URL + "/hook", "always": true})
	out := resources.Execute(t.Context(), h, &resources.Env{Noop: true})
	if out.Status != resources.StatusChanged || out.Message != "would send POST "+a.URL+"/hook" || a.count("POST /hook") != 0 {
		t.Fatalf("noop %+v, %d sent", out, a.count("POST /hook"))
	}
	for i := 1; i <= 2; i++ {
		if out := resources.Execute(t.Context(), h, &resources.Env{}); out.Status != resources.StatusChanged || a.count("POST /hook") != i {
			t.Fatalf("run %d: %+v, %d sent", i, out, a.count("POST /hook"))
		}
	}

	// refreshonly: nothing until refreshed.
	r := build(t, map[string]any{"method": "POST", "url": a.URL + "/hook", "refreshonly": true})
	if out := resources.Execute(t.Context(), r, &resources.Env{}); out.Status != resources.StatusStable || a.count("POST /hook") != 2 {
		t.Fatalf("refreshonly %+v", out)
	}
	if out := resources.Execute(t.Context(), r, &resources.Env{Refresh: true}); out.Status != resources.StatusChanged || a.count("POST /hook") != 3 {
		t.Fatalf("refreshonly refreshed %+v", out)
	}
}

func TestRequestTimeout(t *testing.T) {
	t.Parallel()
	gone := make(chan struct{})
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		<-r.Context().Done() // hang until the client gives up
		close(gone)
	}))
	defer srv.Close()
	h := build(t, map[string]any{"url": srv.URL, "request_timeout": "200ms"})
	out := resources.Execute(t.Context(), h, &resources.Env{})
	if out.Status != resources.StatusFailed || !strings.Contains(out.Message, "request timed out after 200ms") {
		t.Fatalf("outcome %+v", out)
	}
	<-gone
}

func TestCredentialsNotShown(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	u := strings.Replace(a.URL, "http://", "http://user:hunter2@", 1)
	h := build(t, map[string]any{"url": u + "/missing", "headers": map[string]any{"Authorization": "Bearer sekrit"}})
	out := resources.Execute(t.Context(), h, &resources.Env{})
	if out.Status != resources.StatusFailed || strings.Contains(out.Err.Error(), "hunter2") || strings.Contains(out.Err.Error(), "sekrit") || !strings.Contains(out.Message, "404") {
		t.Fatalf("outcome %+v", out)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		props map[string]any
		want  string
	}{
		{map[string]any{"url": "http://x/", "method": "POST"}, "method POST: a request that changes something needs an unless guard or always: true"},
		{map[string]any{"url": "x"}, `url "x": want an http:// or https:// address`},
		{map[string]any{"url": "http://x/", "match": "("}, "match: error parsing regexp"},
		{map[string]any{"url": "http://x/", "request_timeout": "11m"}, `request_timeout "11m": want a duration above 0 and at most 10m0s`},
		{map[string]any{"url": "http://x/", "method": "POST", "always": true, "unless": map[string]any{}}, "unless and always are mutually exclusive"},
		{map[string]any{"url": "http://x/", "method": "GE T"}, "not a valid HTTP method"},
		{map[string]any{"url": "http://x/", "unless": map[string]any{"url": "ftp://y"}}, `unless.url "ftp://y"`},
		{map[string]any{"url": "http://x/", "statuss": 200}, `unknown property "statuss"`},
	}
	for _, tt := range tests {
		r, err := New(resources.Spec{Type: Type, Name: "n", Properties: tt.props})
		if err == nil {
			err = r.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.props, err, tt.want)
		}
	}
	if _, err := New(resources.Spec{Type: Type, Name: "http://x/"}); err != nil {
		t.Fatal(err)
	}
}

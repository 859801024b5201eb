package http

import (
	"errors"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

// seen is a loopback server that records the X-Token and Authorization
// headers of each request by path, and redirects /go?to=URL with status
// code /go?code= (302 by default).
type seen struct {
	*httptest.Server
	mu      sync.Mutex
	headers map[string][]string
	bodies  map[string]string
}

func newSeen(t *testing.T, addr string) *seen {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	s := &seen{headers: map[string][]string{}, bodies: map[string]string{}}
	s.Server = httptest.NewUnstartedServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		b := new(strings.Builder)
		if r.Body != nil {
			buf := make([]byte, 1024)
			n, _ := r.Body.Read(buf)
			b.Write(buf[:n])
		}
		s.mu.Lock()
		s.headers[r.URL.Path] = append(s.headers[r.URL.Path], r.Header.Get("X-Token")+"|"+r.Header.Get("Authorization"))
		s.bodies[r.URL.Path] += b.String()
		s.mu.Unlock()
		if to := r.URL.Query().Get("to"); to != "" {
			code := nethttp.StatusFound
			if r.URL.Query().Get("code") == "307" {
				code = nethttp.StatusTemporaryRedirect
			}
			nethttp.Redirect(w, r, to, code)
			return
		}
		w.WriteHeader(nethttp.StatusOK)
	}))
	s.Listener.Close()
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *seen) got(path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.headers[path]...)
}

// TestRedirectKeepsHeadersFromOtherHosts: a secret header (and
// Authorization) set by the manifest reaches the host it was written for
// and one redirect on the same host (another port included), never a
// redirect to another host name.
func TestRedirectKeepsHeadersFromOtherHosts(t *testing.T) {
	t.Parallel()
	first := newSeen(t, "127.0.0.1:0")
	samePort := newSeen(t, "127.0.0.1:0")
	other := newSeen(t, "127.0.0.2:0")
	headers := map[string]any{"X-Token": "s3cret", "Authorization": "Bearer t0k"}
	const want = "s3cret|Bearer t0k"
	for _, tc := range []struct {
		name, to string
		srv      *seen
		want     string
	}{
		{"same host and port", first.URL + "/same", first, want},
		{"same host, another port", samePort.URL + "/port", samePort, want},
		{"another host", other.URL + "/other", other, "|"},
		{"another host name for the same address", strings.Replace(samePort.URL, "127.0.0.1", "localhost", 1) + "/name", samePort, "|"},
	} {
		path := tc.to[strings.LastIndex(tc.to, "/"):]
		h := build(t, map[string]any{"url": first.URL + "/go?to=" + tc.to, "headers": headers})
		if out := resources.Execute(t.Context(), h, &resources.Env{}); out.Status != resources.StatusStable {
			t.Fatalf("%s: %+v", tc.name, out)
		}
		if got := tc.srv.got(path); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: the redirect's target saw %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := first.got("/go"); len(got) != 4 || got[0] != want {
		t.Fatalf("the first host saw %q", got)
	}
}

// TestRedirectRefusesBodyToOtherHost: a 307 would send a POST's body again
// to the redirect's target; to another host that fails the resource.
func TestRedirectRefusesBodyToOtherHost(t *testing.T) {
	t.Parallel()
	first := newSeen(t, "127.0.0.1:0")
	other := newSeen(t, "127.0.0.2:0")
	h := build(t, map[string]any{"method": "POST", "always": true, "body": "secret-body",
		"url": first.URL + "/go?code=307&to=" + other.URL + "/hook"})
	out := resources.Execute(t.Context(), h, &resources.Env{})
	if out.Status != resources.StatusFailed || !errors.Is(out.Err, ErrCrossHostBody) {
		t.Fatalf("outcome %+v", out)
	}
	if got := other.got("/hook"); len(got) != 0 {
		t.Fatalf("the other host got the request: %q", got)
	}
	// On the same host the body follows the 307.
	h = build(t, map[string]any{"method": "POST", "always": true, "body": "secret-body",
		"url": first.URL + "/go?code=307&to=" + first.URL + "/hook"})
	if out := resources.Execute(t.Context(), h, &resources.Env{}); out.Status != resources.StatusChanged {
		t.Fatalf("same host: %+v", out)
	}
	first.mu.Lock()
	defer first.mu.Unlock()
	if first.bodies["/hook"] != "secret-body" {
		t.Fatalf("same-host 307 body %q", first.bodies["/hook"])
	}
}

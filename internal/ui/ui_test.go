package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/internal/ui"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"), goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

const deadline = 30 * time.Second

type testBundle struct {
	bus *bus.Bus
	srv *httptest.Server
	dir string
}

// setup starts a real embedded JetStream server, a coordinator, a worker
// named worker-test and the web view on a loopback HTTP server.
func setup(t *testing.T) *testBundle {
	t.Helper()
	_, b := bustest.Start(t, bus.Config{})
	log := slog.New(slog.DiscardHandler)
	c, err := coordinator.New(coordinator.Config{Bus: b, Logger: log, Name: "coord-test"})
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(c.Stop)
	w, err := worker.New(worker.Config{Bus: b, Registry: builtin.Registry(), Name: "worker-test", Concurrency: 2, Logger: log})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(w.Kill)
	s, err := ui.New(ui.Config{Bus: b, JaegerURL: "http://jaeger.example:16686/", Logger: log})
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &testBundle{bus: b, srv: srv, dir: t.TempDir()}
}

// runBundle submits a bundle of files (entry manifest.yaml) and waits
// for the run to finish.
func (tb *testBundle) runBundle(t *testing.T, files map[string]string) *coordinator.Report {
	t.Helper()
	bd := bundle.New()
	for name, content := range files {
		require.NoError(t, bd.Add(name, []byte(content)))
	}
	data, err := bd.Archive()
	require.NoError(t, err)
	ref, err := tb.bus.PutBundle(t.Context(), data)
	require.NoError(t, err)
	req := bus.RunRequest{RunID: coordinator.NewRunID(), ManifestName: "manifest.yaml", Bundle: ref, Entry: "manifest.yaml"}
	require.NoError(t, tb.bus.SubmitRun(t.Context(), req, req.RunID))
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	require.NoError(t, tb.bus.FollowEvents(ctx, req.RunID, func(ev bus.Event) bool {
		return ev.Kind != bus.EventRunFinished || ev.RunID != req.RunID
	}))
	rep, err := coordinator.GetReport(t.Context(), tb.bus, req.RunID)
	require.NoError(t, err)
	return rep
}

func (tb *testBundle) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(tb.srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func contains(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q:\n%s", w, body)
		}
	}
}

// hostile is a resource name that is markup: every page must show it as
// text.
const hostile = `<script>alert("x")</script><img src=x onerror=alert(1)>`

func TestPages(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	out := filepath.Join(tb.dir, "out")
	require.NoError(t, os.MkdirAll(out, 0o755))
	ok := tb.runBundle(t, map[string]string{
		"manifest.yaml": `
resources:
  - file:
      - ` + out + `/conf: {content: "a\n"}
  - exec:
      - '` + hostile + `': {command: /bin/true, subscribe: ["file#` + out + `/conf"]}
      - broken: {command: "/bin/sh -c 'echo boom >&2; exit 3'"}
  - apply:
      - child.yaml: {}
`,
		"child.yaml": "resources:\n  - exec:\n      - inner: {command: /bin/true}\n",
	})
	require.Equal(t, coordinator.RunFailed, ok.Status)

	code, body := tb.get(t, "/")
	require.Equal(t, http.StatusOK, code)
	contains(t, body, `data-worker="worker-test"`, "<td>default</td>", `data-pool="default"`, `href="/runs/`+ok.RunID+`"`, "failed")

	code, body = tb.get(t, "/runs/"+ok.RunID)
	require.Equal(t, http.StatusOK, code)
	contains(t, body,
		`data-final="true"`,
		`<span class="badge status-failed" id="run-status">failed</span>`,
		`href="http://jaeger.example:16686/trace/`+ok.TraceID+`"`,
		"<svg", `id="res_r0" class="node resource status-changed"`, `id="res_r2" class="node resource status-failed"`,
		`id="res_r3_0" class="node resource status-changed"`, // the child run's resource in the apply cluster
		`data-ref="exec#inner"`, "boom", "&lt;script&gt;alert(", `class="diff"`,
	)
	for _, bad := range []string{"<script>alert", "<img src=x"} {
		if strings.Contains(body, bad) {
			t.Errorf("page holds the raw name %q:\n%s", bad, body)
		}
	}

	code, body = tb.get(t, "/runs/"+ok.RunID+"/live")
	require.Equal(t, http.StatusOK, code)
	require.True(t, strings.HasPrefix(strings.TrimSpace(body), `<div id="live"`), body)

	code, body = tb.get(t, "/runs?status=failed")
	require.Equal(t, http.StatusOK, code)
	contains(t, body, `data-run="`+ok.RunID+`"`)
	code, body = tb.get(t, "/runs?status=succeeded")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, `data-run="`+ok.RunID+`"`)
	contains(t, body, `id="no-runs"`)
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	for path, want := range map[string]struct {
		code int
		text string
	}{
		"/runs?status=nosuch":              {400, "status &#34;nosuch&#34;: want one of queued, running, succeeded, failed, cancelled"},
		"/runs?limit=0":                    {400, "want a number from 1 to 1000"},
		"/runs?limit=1001":                 {400, "want a number from 1 to 1000"},
		"/runs?limit=1000":                 {200, "Newest first"},
		"/runs/nosuch":                     {404, "no run nosuch"},
		"/runs/a.b":                        {400, "run ID"},
		"/nosuch":                          {404, ""},
		"/static/ui.css":                   {200, "--fg"},
		"/runs/" + strings.Repeat("x", 40): {404, "no run"},
	} {
		code, body := tb.get(t, path)
		if code != want.code || !strings.Contains(body, want.text) {
			t.Errorf("GET %s: %d, want %d with %q:\n%s", path, code, want.code, want.text, body)
		}
	}
	resp, err := http.Post(tb.srv.URL+"/runs", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
	resp, err = http.Get(tb.srv.URL + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
}

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestJaeger runs a run tree against a real Jaeger (v2 all-in-one, memory
// storage) and reads its trace back through Jaeger's query API. Set
// MANIFOLD_JAEGER_BIN to the binary `go tool -modfile=tools.mod task
// jaeger:build` makes (.cache/jaeger/jaeger); skipped otherwise.
func TestJaeger(t *testing.T) {
	bin := os.Getenv("MANIFOLD_JAEGER_BIN")
	if bin == "" {
		t.Skip("MANIFOLD_JAEGER_BIN is not set (build it with: go tool -modfile=tools.mod task jaeger:build)")
	}
	t.Parallel()
	j := startJaeger(t, bin)
	c := traceCluster(t, j.otlp, "jw1")

	dir := t.TempDir()
	writeFile(t, dir, "site.yaml", `resources:
  - {type: apply, name: child/manifest.yaml}
  - {type: exec, name: broken, command: /bin/false}
`)
	if err := os.MkdirAll(filepath.Join(dir, "child", "grandchild"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "child"), "manifest.yaml", `resources:
  - {type: file, name: "`+filepath.Join(dir, "out.txt")+`", content: "out\n"}
  - {type: apply, name: grandchild/manifest.yaml}
`)
	writeFile(t, filepath.Join(dir, "child", "grandchild"), "manifest.yaml", `resources:
  - {type: exec, name: hello, command: "/bin/echo hello"}
`)
	r := runWith(t, runOpts{dir: dir, env: traceEnv("OTEL_EXPORTER_OTLP_ENDPOINT=" + j.otlp)},
		"run", "--server", c.url, "--output", "json", "site.yaml")
	wantCode(t, r, 1)
	rep := decodeReport(t, r)
	if len(rep.TraceID) != 32 {
		t.Fatalf("no trace id in the report:\n%s", r)
	}

	// Poll the query API until the trace holds every process's last span.
	url := j.query + "/api/traces/" + rep.TraceID
	var tr jaegerTrace
	distEventually(t, 30*time.Second, "the trace in Jaeger", func() (bool, string) {
		var err error
		tr, err = getJaegerTrace(url)
		if err != nil {
			return false, err.Error()
		}
		have := tr.names()
		for _, n := range []string{"manifold run site.yaml", "run site.yaml", "run child/manifest.yaml",
			"run grandchild/manifest.yaml", "execute exec#broken", "execute exec#hello"} {
			if !slices.Contains(have, n) {
				return false, fmt.Sprintf("no span %q yet; have %q", n, have)
			}
		}
		return true, ""
	})
	t.Logf("GET %s: %d spans, %d processes\n%s", url, len(tr.Spans), len(tr.Processes), tr.tree())

	parentOf := func(name string) string {
		t.Helper()
		s := tr.find(t, name)
		for _, ref := range s.References {
			if ref.RefType == "CHILD_OF" {
				if p, ok := tr.byID(ref.SpanID); ok {
					return p.OperationName
				}
				return "unknown span " + ref.SpanID
			}
		}
		return ""
	}
	for child, parent := range map[string]string{
		"manifold run site.yaml":                  "",
		"run site.yaml":                           "manifold run site.yaml",
		"resource apply#child/manifest.yaml":      "run site.yaml",
		"run child/manifest.yaml":                 "resource apply#child/manifest.yaml",
		"resource apply#grandchild/manifest.yaml": "run child/manifest.yaml",
		"run grandchild/manifest.yaml":            "resource apply#grandchild/manifest.yaml",
		"resource exec#hello":                     "run grandchild/manifest.yaml",
		"execute exec#hello":                      "resource exec#hello",
		"resource exec#broken":                    "run site.yaml",
		"execute exec#broken":                     "resource exec#broken",
	} {
		if got := parentOf(child); got != parent {
			t.Errorf("span %q: want parent %q, got %q", child, parent, got)
		}
	}
	for name, service := range map[string]string{"manifold run site.yaml": "manifold-cli",
		"run site.yaml": "manifold-coordinator", "execute exec#hello": "manifold-worker"} {
		if got := tr.service(tr.find(t, name)); got != service {
			t.Errorf("span %q: want service %s, got %q", name, service, got)
		}
	}
	child := rep.resource(t, "apply#child/manifest.yaml").Child
	if child == nil {
		t.Fatalf("no child report:\n%s", r)
	}
	sub := tr.find(t, "run child/manifest.yaml")
	for k, v := range map[string]string{"manifold.run_id": child.RunID, "manifold.parent_run_id": rep.RunID,
		"manifold.root_run_id": rep.RunID, "manifold.depth": "1"} {
		if got := sub.tag(k); got != v {
			t.Errorf("run child/manifest.yaml: want %s=%s, got %q", k, v, got)
		}
	}
	if broken := tr.find(t, "execute exec#broken"); broken.tag("error") != "true" || broken.tag("otel.status_code") != "ERROR" {
		t.Errorf("execute exec#broken: want error=true and otel.status_code=ERROR, got tags %v", broken.Tags)
	}
}

// jaeger is a running Jaeger all-in-one.
type jaeger struct {
	// otlp is the OTLP/HTTP endpoint, query the query API's base URL.
	otlp, query string
}

// startJaeger runs the Jaeger v2 binary with memory storage, its OTLP/HTTP
// receiver and query service on free loopback ports (nothing else
// listens), and waits until both answer. It is killed when the test ends.
func startJaeger(t *testing.T, bin string) *jaeger {
	t.Helper()
	otlpPort, httpPort, grpcPort := distFreePort(t), distFreePort(t), distFreePort(t)
	cfg := writeFile(t, t.TempDir(), "jaeger.yaml", fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, httpPort, grpcPort, otlpPort))
	cmd := exec.Command(bin, "--config", cfg)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		// Killed, not stopped: its storage is memory, and on SIGTERM this
		// build spends 10 s failing to flush its own traces to :4317.
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("jaeger:\n%s", out.String())
		}
	})
	j := &jaeger{otlp: "http://127.0.0.1:" + strconv.Itoa(otlpPort), query: "http://127.0.0.1:" + strconv.Itoa(httpPort)}
	distEventually(t, 30*time.Second, "Jaeger answers", func() (bool, string) {
		select {
		case <-done:
			t.Fatalf("jaeger exited:\n%s", out.String())
		default:
		}
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(otlpPort), time.Second)
		if err != nil {
			return false, "OTLP receiver: " + err.Error()
		}
		conn.Close()
		resp, err := http.Get(j.query + "/api/services")
		if err != nil {
			return false, "query: " + err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "query: " + resp.Status
	})
	return j
}

// lockedBuffer is an output buffer two streams may write at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// jaegerTrace is a trace as Jaeger's v1 query API returns it.
type jaegerTrace struct {
	TraceID   string       `json:"traceID"`
	Spans     []jaegerSpan `json:"spans"`
	Processes map[string]struct {
		ServiceName string      `json:"serviceName"`
		Tags        []jaegerTag `json:"tags"`
	} `json:"processes"`
}

type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64       `json:"startTime"`
	Duration  int64       `json:"duration"`
	Tags      []jaegerTag `json:"tags"`
	ProcessID string      `json:"processID"`
}

type jaegerTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// tag returns the span's tag key as text ("" when absent).
func (s jaegerSpan) tag(key string) string {
	for _, tg := range s.Tags {
		if tg.Key == key {
			return fmt.Sprint(tg.Value)
		}
	}
	return ""
}

// getJaegerTrace fetches /api/traces/<id>.
func getJaegerTrace(url string) (jaegerTrace, error) {
	resp, err := http.Get(url)
	if err != nil {
		return jaegerTrace{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return jaegerTrace{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var body struct {
		Data []jaegerTrace `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return jaegerTrace{}, fmt.Errorf("GET %s: %w", url, err)
	}
	if len(body.Data) != 1 {
		return jaegerTrace{}, fmt.Errorf("GET %s: %d traces", url, len(body.Data))
	}
	return body.Data[0], nil
}

func (tr jaegerTrace) names() []string {
	out := make([]string, len(tr.Spans))
	for i, s := range tr.Spans {
		out[i] = s.OperationName
	}
	return out
}

func (tr jaegerTrace) byID(id string) (jaegerSpan, bool) {
	for _, s := range tr.Spans {
		if s.SpanID == id {
			return s, true
		}
	}
	return jaegerSpan{}, false
}

func (tr jaegerTrace) find(t *testing.T, name string) jaegerSpan {
	t.Helper()
	for _, s := range tr.Spans {
		if s.OperationName == name {
			return s
		}
	}
	t.Fatalf("no span %q in the trace; have %q", name, tr.names())
	return jaegerSpan{}
}

func (tr jaegerTrace) service(s jaegerSpan) string { return tr.Processes[s.ProcessID].ServiceName }

// tree renders the trace as an indented tree, children by start time:
// "name [service] duration".
func (tr jaegerTrace) tree() string {
	children := map[string][]jaegerSpan{}
	for _, s := range tr.Spans {
		parent := ""
		for _, ref := range s.References {
			if ref.RefType == "CHILD_OF" {
				parent = ref.SpanID
			}
		}
		if _, ok := tr.byID(parent); !ok {
			parent = ""
		}
		children[parent] = append(children[parent], s)
	}
	var b strings.Builder
	var walk func(id, indent string)
	walk = func(id, indent string) {
		kids := children[id]
		slices.SortFunc(kids, func(a, b jaegerSpan) int { return int(a.StartTime - b.StartTime) })
		for _, s := range kids {
			status := ""
			if s.tag("otel.status_code") == "ERROR" {
				status = " ERROR"
			}
			fmt.Fprintf(&b, "%s%s [%s] %s%s\n", indent, s.OperationName, tr.service(s),
				time.Duration(s.Duration)*time.Microsecond, status)
			walk(s.SpanID, indent+"  ")
		}
	}
	walk("", "")
	return b.String()
}

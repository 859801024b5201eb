package e2e

import (
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/manifold-run/manifold/bus"
)

// TestTraceAcrossProcesses runs a server, a coordinator, a worker and the
// client as separate processes exporting OTLP/HTTP to a receiver the test
// serves, and checks that a run tree (a two-level apply and a failing
// exec) is one trace: the client's span → run → resource → execute (in the
// worker) → the engine's steps → commands, each child run under its apply
// resource's span.
func TestTraceAcrossProcesses(t *testing.T) {
	t.Parallel()
	recv := startTraceReceiver(t)
	c := traceCluster(t, recv.url, "tw1")

	// Subtests run in order: the first one checks that every span received
	// so far belongs to its run's trace.
	t.Run("run tree", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "out.txt")
		writeFile(t, dir, "site.yaml", `resources:
  - {type: apply, name: child/manifest.yaml}
  - {type: exec, name: broken, command: "/bin/sh -c 'echo kaputt >&2; exit 3'"}
`)
		if err := os.MkdirAll(filepath.Join(dir, "child", "grandchild"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "child"), "manifest.yaml", `resources:
  - {type: file, name: "`+out+`", content: "out\n"}
  - {type: apply, name: grandchild/manifest.yaml}
`)
		writeFile(t, filepath.Join(dir, "child", "grandchild"), "manifest.yaml", `resources:
  - {type: exec, name: hello, command: "/bin/echo hello", unless: "/bin/false"}
`)
		r := runWith(t, runOpts{dir: dir, env: traceEnv("OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.url)},
			"run", "--server", c.url, "--output", "json", "site.yaml")
		wantCode(t, r, 1)
		rep := decodeReport(t, r)
		if rep.Status != "failed" || len(rep.TraceID) != 32 {
			t.Fatalf("want a failed run with a trace id, got:\n%s", r)
		}
		child := rep.resource(t, "apply#child/manifest.yaml").Child
		if child == nil {
			t.Fatalf("apply#child/manifest.yaml has no child report:\n%s", r)
		}
		grandchild := child.resource(t, "apply#grandchild/manifest.yaml").Child
		if grandchild == nil {
			t.Fatalf("apply#grandchild/manifest.yaml has no child report:\n%s", r)
		}
		broken := rep.resource(t, "exec#broken")
		if broken.Status != "failed" || broken.Error == "" {
			t.Fatalf("exec#broken: want failed with an error, got %+v", broken)
		}

		// Each process's last span ends after its others (children end
		// before parents) and batches are exported in order: once these
		// are in, so is everything before them.
		tr := recv.waitFor(t, 20*time.Second, "manifold run site.yaml", "run site.yaml", "execute exec#broken",
			"run child/manifest.yaml", "run grandchild/manifest.yaml")

		// One trace across the processes, the report's.
		services := map[string]bool{}
		for _, s := range tr.spans {
			if s.traceID != rep.TraceID {
				t.Errorf("span %q of %s is in trace %s, not the run's %s", s.name, s.service(), s.traceID, rep.TraceID)
			}
			if s.resource["host.name"] == "" {
				t.Errorf("span %q of %s: no host.name in resource %v", s.name, s.service(), s.resource)
			}
			services[s.service()] = true
		}
		if want := []string{"manifold-cli", "manifold-coordinator", "manifold-worker"}; !equalKeys(services, want) {
			t.Errorf("services: want %v, got %v", want, services)
		}

		// client → run → resource → execute → steps → commands.
		client := tr.find(t, "manifold run site.yaml")
		tr.wantService(t, client, "manifold-cli")
		if client.parentID != "" || client.kind != tracepb.Span_SPAN_KIND_PRODUCER {
			t.Errorf("client span: want a root producer span, got parent %q kind %s", client.parentID, client.kind)
		}
		root := tr.find(t, "run site.yaml")
		tr.wantService(t, root, "manifold-coordinator")
		tr.wantParent(t, root, client)
		tr.wantAttrs(t, root, map[string]string{"manifold.run_id": rep.RunID, "manifold.root_run_id": rep.RunID,
			"manifold.parent_run_id": "", "manifold.depth": "0", "manifold.manifest": "site.yaml",
			"manifold.noop": "false", "manifold.health_check_only": "false", "manifold.status": "failed"})
		tr.wantKeys(t, root, "manifold.pool")
		if root.statusCode != tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("run site.yaml: want status error, got %s", root.statusCode)
		}

		applyChild := tr.find(t, "resource apply#child/manifest.yaml")
		tr.wantParent(t, applyChild, root)
		childRun := tr.find(t, "run child/manifest.yaml")
		tr.wantParent(t, childRun, applyChild)
		tr.wantAttrs(t, childRun, map[string]string{"manifold.run_id": child.RunID, "manifold.parent_run_id": rep.RunID,
			"manifold.root_run_id": rep.RunID, "manifold.depth": "1", "manifold.manifest": "child/manifest.yaml",
			"manifold.status": "succeeded"})
		applyGrand := tr.find(t, "resource apply#grandchild/manifest.yaml")
		tr.wantParent(t, applyGrand, childRun)
		grandRun := tr.find(t, "run grandchild/manifest.yaml")
		tr.wantParent(t, grandRun, applyGrand)
		tr.wantAttrs(t, grandRun, map[string]string{"manifold.run_id": grandchild.RunID, "manifold.parent_run_id": child.RunID,
			"manifold.root_run_id": rep.RunID, "manifold.depth": "2", "manifold.manifest": "grandchild/manifest.yaml"})

		// A file in the child: check, apply, re-check.
		fileRes := tr.find(t, "resource file#"+out)
		tr.wantParent(t, fileRes, childRun)
		tr.wantAttrs(t, fileRes, map[string]string{"manifold.run_id": child.RunID, "manifold.resource.ref": "file#" + out,
			"manifold.resource.type": "file", "manifold.resource.name": out, "manifold.attempt": "1",
			"manifold.status": "changed", "manifold.changed": "true", "manifold.refreshed": "false", "manifold.worker": "tw1"})
		tr.wantKeys(t, fileRes, "manifold.pool")
		fileExec := tr.find(t, "execute file#"+out)
		tr.wantService(t, fileExec, "manifold-worker")
		tr.wantParent(t, fileExec, fileRes) // across processes, through the task's NATS headers
		if fileExec.kind != tracepb.Span_SPAN_KIND_CONSUMER {
			t.Errorf("execute span: want kind consumer, got %s", fileExec.kind)
		}
		if got := fileExec.resource["service.instance.id"]; got != "tw1" {
			t.Errorf("worker resource: want service.instance.id tw1, got %q", got)
		}
		tr.wantAttrs(t, fileExec, map[string]string{"manifold.run_id": child.RunID, "manifold.root_run_id": rep.RunID,
			"manifold.resource.ref": "file#" + out, "manifold.resource.type": "file", "manifold.resource.name": out,
			"manifold.manifest": "child/manifest.yaml", "manifold.attempt": "1", "manifold.delivery": "1",
			"manifold.noop": "false", "manifold.worker": "tw1", "manifold.pool": "default",
			"manifold.status": "changed", "manifold.changed": "true", "manifold.refreshed": "false"})
		if got := tr.childNames(fileExec); !slices.Equal(got, []string{"apply", "check", "re-check"}) {
			t.Errorf("steps of execute file#%s: want apply, check, re-check; got %v", out, got)
		}

		// An exec in the grandchild: its guard runs in check, its command in apply.
		helloRes := tr.find(t, "resource exec#hello")
		tr.wantParent(t, helloRes, grandRun)
		hello := tr.find(t, "execute exec#hello")
		tr.wantParent(t, hello, helloRes)
		if got := tr.childNames(hello); !slices.Equal(got, []string{"apply", "check"}) {
			t.Errorf("steps of execute exec#hello: want apply, check; got %v", got)
		}
		for _, step := range tr.children(hello) {
			want := map[string]string{"check": "command false", "apply": "command echo"}[step.name]
			cmds := tr.children(step)
			i := slices.IndexFunc(cmds, func(s otlpSpan) bool { return s.name == want })
			if i < 0 {
				t.Errorf("step %s of exec#hello: want a span %q, got %v", step.name, want, names(cmds))
				continue
			}
			tr.wantKeys(t, cmds[i], "manifold.command", "manifold.command.exit_code")
		}

		// The failed resource: error status with the message, on both sides.
		brokenRes := tr.find(t, "resource exec#broken")
		tr.wantParent(t, brokenRes, root)
		brokenExec := tr.find(t, "execute exec#broken")
		tr.wantParent(t, brokenExec, brokenRes)
		for _, s := range []otlpSpan{brokenRes, brokenExec} {
			tr.wantAttrs(t, s, map[string]string{"manifold.status": "failed", "manifold.changed": "false"})
			if s.statusCode != tracepb.Status_STATUS_CODE_ERROR || s.statusMessage == "" {
				t.Errorf("%s: want status error with a message, got %s %q", s.name, s.statusCode, s.statusMessage)
			}
			if !strings.Contains(s.statusMessage, "3") {
				t.Errorf("%s: status message %q does not tell the exit code 3 (report: %q)", s.name, s.statusMessage, broken.Error)
			}
		}
	})

	t.Run("traceparent of a plain NATS client", func(t *testing.T) {
		traceID, parentID := randomHex(t, 16), randomHex(t, 8)
		runID := "tp-" + randomHex(t, 4)
		data, err := json.Marshal(bus.RunRequest{V: bus.Version, RunID: runID, ManifestName: "ci.yaml",
			ManifestYAML: "resources:\n  - {type: exec, name: ci, command: /bin/true}\n"})
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg("manifold.runs.submit")
		msg.Data = data
		msg.Header["traceparent"] = []string{"00-" + traceID + "-" + parentID + "-01"} // lowercase, as other clients send it
		if err := c.nc.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
		rep := c.waitFinal(t, runID, 30*time.Second)
		if rep.Status != "succeeded" || rep.TraceID != traceID {
			t.Fatalf("want a succeeded run in trace %s, got status %s trace %q", traceID, rep.Status, rep.TraceID)
		}
		tr := recv.waitFor(t, 20*time.Second, "run ci.yaml", "execute exec#ci")
		run := tr.find(t, "run ci.yaml")
		if run.traceID != traceID || run.parentID != parentID {
			t.Errorf("run ci.yaml: want trace %s parent %s, got trace %s parent %s", traceID, parentID, run.traceID, run.parentID)
		}
		if exec := tr.find(t, "execute exec#ci"); exec.traceID != traceID {
			t.Errorf("execute exec#ci: in trace %s, want %s", exec.traceID, traceID)
		}

		// --jaeger-url and MANIFOLD_JAEGER_URL link the trace; JSON adds nothing.
		link := "trace " + traceID + " http://jaeger.test:16686/trace/" + traceID
		r := c.run(t, "status", "--jaeger-url", "http://jaeger.test:16686/", runID)
		wantCode(t, r, 0)
		if !slices.Contains(strings.Split(r.stdout, "\n"), link) {
			t.Errorf("status --jaeger-url: want the line %q in:\n%s", link, r)
		}
		r = runWith(t, runOpts{env: []string{"MANIFOLD_SERVER=" + c.url, "MANIFOLD_JAEGER_URL=http://jaeger.test:16686"}},
			"status", runID)
		wantCode(t, r, 0)
		if !slices.Contains(strings.Split(r.stdout, "\n"), link) {
			t.Errorf("status with MANIFOLD_JAEGER_URL: want the line %q in:\n%s", link, r)
		}
		r = runWith(t, runOpts{env: []string{"MANIFOLD_SERVER=" + c.url, "MANIFOLD_JAEGER_URL=http://jaeger.test:16686"}},
			"status", "--output", "json", runID)
		wantCode(t, r, 0)
		if strings.Contains(r.stdout, "jaeger.test") || decodeReport(t, r).TraceID != traceID {
			t.Errorf("status --output json: want the report with trace_id and no link:\n%s", r)
		}
	})

	t.Run("jaeger url after a run", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "m.yaml", "resources:\n  - {type: exec, name: ok, command: /bin/true}\n")
		env := traceEnv("MANIFOLD_JAEGER_URL=http://jaeger.test:16686", "MANIFOLD_SERVER="+c.url)
		r := runWith(t, runOpts{dir: dir, env: env}, "run", "--wait", "m.yaml")
		wantCode(t, r, 0)
		if !regexpLine(r.stdout, `^trace ([0-9a-f]{32}) http://jaeger\.test:16686/trace/([0-9a-f]{32})$`) {
			t.Errorf("run --wait with MANIFOLD_JAEGER_URL: no trace link line in:\n%s", r)
		}
		r = runWith(t, runOpts{dir: dir, env: traceEnv()}, "apply", "--server", c.url, "--jaeger-url", "http://j:1", "m.yaml")
		wantCode(t, r, 0)
		if !regexpLine(r.stdout, `^trace ([0-9a-f]{32}) http://j:1/trace/([0-9a-f]{32})$`) {
			t.Errorf("apply --server --jaeger-url: no trace link line in:\n%s", r)
		}
		r = runWith(t, runOpts{dir: dir, env: traceEnv()}, "apply", "--jaeger-url", "http://j:1", "--output", "json", "m.yaml")
		wantCode(t, r, 0)
		if strings.Contains(r.stdout, "http://j:1") || len(decodeReport(t, r).TraceID) != 32 {
			t.Errorf("apply --output json --jaeger-url: want the report with trace_id and no link:\n%s", r)
		}
		r = runWith(t, runOpts{dir: dir, env: traceEnv()}, "apply", "m.yaml")
		wantCode(t, r, 0)
		if !regexpLine(r.stdout, `^trace ([0-9a-f]{32})$`) {
			t.Errorf("apply without --jaeger-url: want a bare trace line in:\n%s", r)
		}
	})
}

// regexpLine reports whether a line of out matches the pattern, whose two
// groups (the trace id, twice) must be equal.
func regexpLine(out, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for _, line := range strings.Split(out, "\n") {
		if m := re.FindStringSubmatch(line); m != nil && (len(m) < 3 || m[1] == m[2]) {
			return true
		}
	}
	return false
}

// traceEnv is the environment of a process under a trace test: spans are
// sent 100 ms after they end, and nothing from the test's own environment
// changes where they go or what they are called. more is appended.
func traceEnv(more ...string) []string {
	return append([]string{"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_EXPORTER_OTLP_ENDPOINT=",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_EXPORTER_OTLP_PROTOCOL=", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=",
		"OTEL_SERVICE_NAME=", "OTEL_RESOURCE_ATTRIBUTES=", "OTEL_TRACES_SAMPLER=", "MANIFOLD_JAEGER_URL="}, more...)
}

// traceCluster starts a server, a coordinator and one worker of pool
// default named worker, the coordinator and the worker exporting traces
// (and metrics) to the OTLP/HTTP endpoint with --otlp-endpoint, and waits
// until they are ready.
func traceCluster(t *testing.T, endpoint, worker string) *distCluster {
	t.Helper()
	c := &distCluster{dir: t.TempDir()}
	addr := "127.0.0.1:" + strconv.Itoa(distFreePort(t))
	c.url = "nats://" + addr
	env := runOpts{env: traceEnv()}
	start(t, env, "server", "--listen", addr, "--store-dir", filepath.Join(c.dir, "jetstream"))
	distEventually(t, 20*time.Second, "the server accepts connections", func() (bool, string) {
		nc, err := natsConnect(c.url, nats.Timeout(time.Second))
		if err != nil {
			return false, err.Error()
		}
		c.nc = nc
		return true, ""
	})
	t.Cleanup(c.nc.Close)
	c.coord = start(t, env, "coordinator", "--server", c.url, "--name", "tcoord", "--otlp-endpoint", endpoint)
	distEventually(t, 30*time.Second, "the coordinator serves the API", func() (bool, string) {
		msg, err := c.nc.Request("manifold.api.runs.list", []byte(`{"limit": 1}`), time.Second)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(string(msg.Data), `"runs"`), string(msg.Data)
	})
	start(t, env, "worker", "--server", c.url, "--name", worker, "--pool", "default", "--concurrency", "2",
		"--cache-dir", filepath.Join(c.dir, "cache-"+worker), "--drain-timeout", "5s", "--otlp-endpoint", endpoint)
	c.waitWorkers(t, func(names []string) bool { return slices.Contains(names, worker) })
	return c
}

// otlpSpan is a span as the receiver decoded it, IDs in hex, attribute
// values as text.
type otlpSpan struct {
	traceID, spanID, parentID string
	name                      string
	kind                      tracepb.Span_SpanKind
	attrs                     map[string]string
	resource                  map[string]string
	statusCode                tracepb.Status_StatusCode
	statusMessage             string
}

func (s otlpSpan) service() string { return s.resource["service.name"] }

// traceReceiver is an OTLP/HTTP receiver on loopback: it keeps the spans
// of every /v1/traces export and acknowledges anything else (metrics).
type traceReceiver struct {
	url   string
	mu    sync.Mutex
	spans []otlpSpan
}

// startTraceReceiver serves a receiver until the test ends (after the
// processes started later have flushed on their way out).
func startTraceReceiver(t *testing.T) *traceReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	recv := &traceReceiver{url: "http://" + ln.Addr().String()}
	srv := &http.Server{Handler: recv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return recv
}

func (recv *traceReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	if r.URL.Path != "/v1/traces" {
		return // metrics: an empty response is an empty message
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []otlpSpan
	for _, rs := range req.ResourceSpans {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				got = append(got, otlpSpan{
					traceID: hex.EncodeToString(s.TraceId), spanID: hex.EncodeToString(s.SpanId),
					parentID: hex.EncodeToString(s.ParentSpanId), name: s.Name, kind: s.Kind,
					attrs: attrMap(s.Attributes), resource: res,
					statusCode: s.GetStatus().GetCode(), statusMessage: s.GetStatus().GetMessage(),
				})
			}
		}
	}
	recv.mu.Lock()
	recv.spans = append(recv.spans, got...)
	recv.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// attrMap renders OTLP attributes as text: strings as they are, numbers
// and booleans as Go prints them.
func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = strconv.FormatBool(v.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
		default:
			m[kv.Key] = kv.GetValue().String()
		}
	}
	return m
}

// waitFor polls the receiver until it holds a span of each name and
// returns what it holds then.
func (recv *traceReceiver) waitFor(t *testing.T, timeout time.Duration, spanNames ...string) *spanTree {
	t.Helper()
	var tr *spanTree
	distEventually(t, timeout, fmt.Sprintf("spans %q", spanNames), func() (bool, string) {
		recv.mu.Lock()
		tr = newSpanTree(slices.Clone(recv.spans))
		recv.mu.Unlock()
		var missing []string
		for _, n := range spanNames {
			if !slices.ContainsFunc(tr.spans, func(s otlpSpan) bool { return s.name == n }) {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0, fmt.Sprintf("missing %q; have %q", missing, names(tr.spans))
	})
	return tr
}

// spanTree indexes received spans by ID.
type spanTree struct {
	spans []otlpSpan
	byID  map[string]otlpSpan
}

func newSpanTree(spans []otlpSpan) *spanTree {
	tr := &spanTree{spans: spans, byID: make(map[string]otlpSpan, len(spans))}
	for _, s := range spans {
		tr.byID[s.spanID] = s
	}
	return tr
}

// find returns the span named name, failing the test when there is none
// or more than one.
func (tr *spanTree) find(t *testing.T, name string) otlpSpan {
	t.Helper()
	var found []otlpSpan
	for _, s := range tr.spans {
		if s.name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one span %q, got %d; spans: %q", name, len(found), names(tr.spans))
	}
	return found[0]
}

// children returns the spans whose parent is s, sorted by name.
func (tr *spanTree) children(s otlpSpan) []otlpSpan {
	var out []otlpSpan
	for _, c := range tr.spans {
		if c.parentID == s.spanID && c.traceID == s.traceID {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b otlpSpan) int { return strings.Compare(a.name, b.name) })
	return out
}

func (tr *spanTree) childNames(s otlpSpan) []string { return names(tr.children(s)) }

func (tr *spanTree) wantParent(t *testing.T, s, parent otlpSpan) {
	t.Helper()
	if s.parentID != parent.spanID || s.traceID != parent.traceID {
		got := "none"
		if p, ok := tr.byID[s.parentID]; ok {
			got = fmt.Sprintf("%q (%s)", p.name, p.service())
		} else if s.parentID != "" {
			got = "unknown span " + s.parentID
		}
		t.Errorf("span %q (%s): want parent %q (%s), got %s", s.name, s.service(), parent.name, parent.service(), got)
	}
}

func (tr *spanTree) wantService(t *testing.T, s otlpSpan, service string) {
	t.Helper()
	if s.service() != service {
		t.Errorf("span %q: want service.name %s, got %q", s.name, service, s.service())
	}
}

func (tr *spanTree) wantAttrs(t *testing.T, s otlpSpan, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got, ok := s.attrs[k]
		if !ok || got != v {
			t.Errorf("span %q: want %s=%q, got %q (present: %t)", s.name, k, v, got, ok)
		}
	}
}

func (tr *spanTree) wantKeys(t *testing.T, s otlpSpan, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := s.attrs[k]; !ok {
			t.Errorf("span %q: no attribute %s in %v", s.name, k, s.attrs)
		}
	}
}

func names(spans []otlpSpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.name
	}
	return out
}

func equalKeys(m map[string]bool, want []string) bool {
	if len(m) != len(want) {
		return false
	}
	for _, k := range want {
		if !m[k] {
			return false
		}
	}
	return true
}

// randomHex returns n random bytes in hex.
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

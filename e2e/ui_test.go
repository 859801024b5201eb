package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// screenshotsEnv names the directory TestUI saves its screenshots in;
// unset, they go to a temporary directory removed after the test (its
// path is logged either way).
const screenshotsEnv = "MANIFOLD_UI_SCREENSHOTS"

// browser starts one headless Chromium for a test and returns a tab's
// context. A machine without chromium fails the test saying how to get it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not on PATH (%v): the web view is tested in a real browser; install it with `apt-get update && apt-get install -y chromium` (Debian; .ci/run does)", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000), chromedp.Flag("disable-gpu", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser now
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return ctx
}

// page runs browser steps with a deadline, failing the test with what
// was being done.
func page(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value reads one value from the page with a deadline.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestUI drives `manifold ui` in a real headless Chromium against a real
// server, coordinator and worker: the fleet page lists the worker and its
// pool, the runs page lists runs newest first and filters by status
// through its form, a failed run's page shows its graph coloured by
// status, the error and stderr of the failure, the diff of the changed
// file, the Jaeger link and a hostile resource name as text, and the page
// of a running run follows it until it ends without a reload.
// Screenshots of each page go to $MANIFOLD_UI_SCREENSHOTS (default: a
// temporary directory).
func TestUI(t *testing.T) {
	t.Parallel()
	shots := os.Getenv(screenshotsEnv)
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s (set %s to keep them)", shots, screenshotsEnv)
	ctx := browser(t)

	c := distStart(t, "w1")
	dir := t.TempDir()
	// A failed run: a file changed (a diff), a hostile name, a failing
	// exec with stderr, an exec skipped after it, an apply child.
	hostile := `<img src=x onerror="window.pwned=1">&amp;"x"`
	writeFile(t, dir, "child.yaml", "resources:\n  - exec:\n      - inner: {command: /bin/true}\n")
	failed := writeFile(t, dir, "site.yaml", `resources:
  - file:
      - `+dir+`/out.conf: {content: "port = 8080\n", show_diff: true}
  - exec:
      - '`+hostile+`': {command: /bin/true, subscribe: ["file#`+dir+`/out.conf"]}
      - broken: {command: "/bin/sh -c 'echo disk full >&2; exit 3'"}
      - after: {command: /bin/true, require: ["exec#broken"]}
  - apply:
      - child.yaml: {}
`)
	r := c.run(t, "run", failed)
	wantCode(t, r, 0)
	failedID := strings.TrimSpace(r.stdout)
	rep := c.waitFinal(t, failedID, 30*time.Second)
	if rep.Status != "failed" {
		t.Fatalf("run %s: %s, want failed", failedID, rep.Status)
	}

	ui := start(t, runOpts{}, "ui", "--server", c.url, "--listen", "127.0.0.1:0",
		"--jaeger-url", "http://jaeger.test:16686", "--poll", "200ms")
	var base string
	serving := regexp.MustCompile(`serving (http://127\.0\.0\.1:\d+)/`)
	distEventually(t, 20*time.Second, "manifold ui prints its URL", func() (bool, string) {
		out := ui.output(&ui.stdout)
		if m := serving.FindStringSubmatch(out); m != nil {
			base = m[1]
			return true, ""
		}
		return false, out + ui.output(&ui.stderr)
	})

	// Fleet.
	page(t, ctx, "load /", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-worker="w1"]`)))
	if got := value(t, ctx, "worker row", chromedp.Text(chromedp.CSS(`tr[data-worker="w1"]`))); !strings.Contains(got, "default") || !strings.Contains(got, "0 / 2") {
		t.Errorf("worker row %q: want pool default and 0 / 2 running", got)
	}
	if got := value(t, ctx, "pool row", chromedp.Text(chromedp.CSS(`tr[data-pool="default"]`))); !strings.Contains(got, "1: w1") {
		t.Errorf("pool row %q: want 1: w1", got)
	}
	page(t, ctx, "last runs", chromedp.WaitVisible(chromedp.CSS(`tr[data-run="`+failedID+`"]`)))
	screenshot(t, ctx, shots, "fleet.png")

	// A live run: its exec waits for a gate file the test creates once
	// the page shows the run running.
	gate := filepath.Join(dir, "gate")
	slow := writeFile(t, dir, "slow.yaml", `resources:
  - exec:
      - wait-for-gate: {command: "/bin/sh -c 'while [ ! -e `+gate+` ]; do sleep 0.05; done'", timeout: 60s}
      - then: {command: /bin/true}
`)
	r = c.run(t, "run", slow)
	wantCode(t, r, 0)
	liveID := strings.TrimSpace(r.stdout)

	// Runs: newest first, then filtered through the form.
	page(t, ctx, "load /runs", chromedp.Navigate(base+"/runs"), chromedp.WaitVisible(chromedp.CSS(`tr[data-run="`+liveID+`"]`)))
	order := value(t, ctx, "run order", chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr[data-run]")].map(e => e.dataset.run)`))
	if len(order) != 2 || order[0] != liveID || order[1] != failedID {
		t.Errorf("runs listed %v, want [%s %s] (newest first)", order, liveID, failedID)
	}
	screenshot(t, ctx, shots, "runs.png")
	page(t, ctx, "filter failed", chromedp.SetValue(chromedp.CSS(`#status-filter`), "failed"), chromedp.Submit(chromedp.CSS(`form.filter`)),
		chromedp.WaitReady(chromedp.CSS(`option[value="failed"][selected]`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-run="`+failedID+`"]`)))
	order = value(t, ctx, "filtered runs", chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr[data-run]")].map(e => e.dataset.run)`))
	if len(order) != 1 || order[0] != failedID {
		t.Errorf("status=failed lists %v, want [%s]", order, failedID)
	}
	if loc := value(t, ctx, "location", chromedp.Location()); !strings.HasSuffix(loc, "status=failed&limit=50") {
		t.Errorf("filtered location %s", loc)
	}
	screenshot(t, ctx, shots, "runs-failed.png")

	// The failed run.
	page(t, ctx, "load the failed run", chromedp.Navigate(base+"/runs/"+failedID), chromedp.WaitVisible(chromedp.CSS(`#graph svg`)))
	for sel, want := range map[string]string{
		"#run-status":                              "failed",
		`tr[data-ref="exec#broken"]`:               "disk full",
		`tr[data-ref="exec#after"]`:                "skipped",
		`tr[data-ref="exec#inner"]`:                "changed",
		`tr[data-ref="file#` + dir + `/out.conf"]`: "+port = 8080",
	} {
		if got := value(t, ctx, "text of "+sel, chromedp.Text(chromedp.CSS(sel))); !strings.Contains(got, want) {
			t.Errorf("%s shows %q, want %q in it", sel, got, want)
		}
	}
	// The hostile name is text in the table and in the graph; nothing ran.
	names := value(t, ctx, "hostile name", chromedp.Evaluate[[]string](`[document.querySelectorAll("tr[data-ref]")[1].dataset.ref, (document.querySelector("#res_r1 title") || {}).textContent || "", String(window.pwned), String(document.querySelectorAll("#live img").length)]`))
	if names[0] != "exec#"+hostile || names[1] != "exec#"+hostile || names[2] != "undefined" || names[3] != "0" {
		t.Errorf("hostile name: row %q, graph node title %q, window.pwned %s, <img> in page %s", names[0], names[1], names[2], names[3])
	}
	classes := value(t, ctx, "node classes", chromedp.Evaluate[[]string](`["res_r0","res_r2","res_r3","res_r4","res_r4_0"].map(id => document.getElementById(id).getAttribute("class"))`))
	for i, want := range []string{"status-changed", "status-failed", "status-skipped", "status-changed", "status-changed"} {
		if !strings.Contains(classes[i], want) {
			t.Errorf("node %d class %q, want %s", i, classes[i], want)
		}
	}
	// The stylesheet colours the failed node (CSS over graphviz's fill).
	if fill := value(t, ctx, "failed fill", chromedp.Evaluate[string](`getComputedStyle(document.querySelector("#res_r2 path, #res_r2 polygon")).fill`)); fill != "rgb(252, 165, 165)" {
		t.Errorf("failed node fill %s, want rgb(252, 165, 165)", fill)
	}
	if href := value(t, ctx, "trace link", chromedp.AttributeValue(chromedp.CSS(`#trace`), "href")); !strings.HasPrefix(href.Value, "http://jaeger.test:16686/trace/") || len(href.Value) != len("http://jaeger.test:16686/trace/")+32 {
		t.Errorf("trace link %q", href.Value)
	}
	screenshot(t, ctx, shots, "run-failed.png")

	// The live run: running, then (the gate opened) succeeded, on the
	// same page (no reload: a marker set on the window survives).
	page(t, ctx, "load the running run", chromedp.Navigate(base+"/runs/"+liveID),
		chromedp.WaitVisible(chromedp.CSS(`#res_r0.status-dispatched`)))
	// Read in one evaluation: the poll script replaces the nodes.
	if got := value(t, ctx, "live status", chromedp.Evaluate[string](`document.getElementById("run-status").textContent`)); got != "running" {
		t.Errorf("live run status %q, want running", got)
	}
	value(t, ctx, "mark the window", chromedp.Evaluate[int](`window.marker = 7`))
	screenshot(t, ctx, shots, "run-live.png")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	page(t, ctx, "the page follows the run to its end", chromedp.WaitVisible(chromedp.CSS(`#live[data-final="true"]`)))
	got := value(t, ctx, "final state", chromedp.Evaluate[[]string](`[document.getElementById("run-status").textContent, document.getElementById("res_r0").getAttribute("class"), document.getElementById("res_r1").getAttribute("class"), String(window.marker), String(!!document.getElementById("following"))]`))
	if got[0] != "succeeded" || !strings.Contains(got[1], "status-changed") || !strings.Contains(got[2], "status-changed") || got[3] != "7" || got[4] != "false" {
		t.Errorf("after the run: status %q, nodes %q %q, marker %s (want 7: no reload), following shown %s", got[0], got[1], got[2], got[3], got[4])
	}
	screenshot(t, ctx, shots, "run-finished.png")

	// An assignment w1 keeps converged: the fleet page shows its state
	// and last run.
	conf := writeFile(t, dir, "conf.yaml", "resources:\n  - file:\n      - "+dir+"/assigned: {content: \"x\\n\"}\n")
	wantCode(t, c.run(t, "assign", "--pool", "default", "conf", conf), 0)
	distEventually(t, 30*time.Second, "the fleet page shows conf converged with its last run", func() (bool, string) {
		page(t, ctx, "load /", chromedp.Navigate(base+"/"))
		got := value(t, ctx, "assignment", chromedp.Evaluate[string](`(document.querySelector('tr[data-worker="w1"] .assignment') || {}).textContent || ""`))
		return strings.Contains(got, "converged conf@1") && strings.Contains(got, "last run"), got
	})
	screenshot(t, ctx, shots, "fleet-assignment.png")
	for _, name := range []string{"fleet.png", "runs.png", "runs-failed.png", "run-failed.png", "run-live.png", "run-finished.png", "fleet-assignment.png"} {
		if fi, err := os.Stat(filepath.Join(shots, name)); err != nil || fi.Size() < 1000 {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}
}

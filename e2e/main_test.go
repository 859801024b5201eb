package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Set by TestMain.
var (
	// manifoldBin is the binary built from ./cmd/manifold.
	manifoldBin string
	// moduleRoot is the directory holding go.mod.
	moduleRoot string
)

// defaultRunTimeout bounds one run of the binary unless runOpts says
// otherwise.
const defaultRunTimeout = 60 * time.Second

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	root, err := findModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	moduleRoot = root
	dir, err := os.MkdirTemp("", "manifold-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The servers the tests start generate their nkeys here, and every
	// process the tests start finds them here (instead of the per-host
	// default); the NATS CLI context goes to a private config directory.
	// The state (last-applied documents, refresh debts) of every process
	// the tests start is private to this test binary.
	for k, v := range map[string]string{"MANIFOLD_CREDENTIALS": filepath.Join(dir, "credentials"), "XDG_CONFIG_HOME": filepath.Join(dir, "config"),
		"MANIFOLD_STATE_DIR": filepath.Join(dir, "state")} {
		if err := os.Setenv(k, v); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	manifoldBin = filepath.Join(dir, "manifold")
	build := exec.Command("go", "build", "-o", manifoldBin, "./cmd/manifold")
	build.Dir = moduleRoot
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build manifold:", err)
		return 1
	}
	return m.Run()
}

// findModuleRoot asks the go command where go.mod is.
func findModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside a module")
	}
	return filepath.Dir(gomod), nil
}

// runOpts adjusts one run of the binary.
type runOpts struct {
	// env is added to the test process's environment (KEY=value).
	env []string
	// dir is the working directory. Defaults to the test's temporary
	// directory.
	dir string
	// timeout kills the process when it runs longer. Defaults to
	// defaultRunTimeout.
	timeout time.Duration
}

// result is what a finished run of the binary left behind.
type result struct {
	args   []string
	stdout string
	stderr string
	code   int
}

func (r result) String() string {
	return fmt.Sprintf("manifold %s: exit %d\n--- stdout:\n%s--- stderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// execManifold runs the binary to completion. It fails only when the
// process could not be started or ran past its deadline; a non-zero exit
// is a result, not an error. Safe to call from any goroutine.
func execManifold(ctx context.Context, o runOpts, args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(o.timeout, defaultRunTimeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, manifoldBin, args...)
	cmd.Dir = o.dir
	cmd.Env = append(os.Environ(), o.env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	if ctx.Err() != nil {
		return r, fmt.Errorf("manifold %s: did not finish in time: %w\n%s", strings.Join(args, " "), ctx.Err(), r)
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return r, fmt.Errorf("manifold %s: %w", strings.Join(args, " "), err)
	}
	return r, nil
}

// run runs the binary with args in the test's temporary directory and an
// isolated TMPDIR, and returns what it printed and its exit code.
func run(t *testing.T, args ...string) result {
	t.Helper()
	return runWith(t, runOpts{}, args...)
}

// runWith is run with options.
func runWith(t *testing.T, o runOpts, args ...string) result {
	t.Helper()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	start := time.Now()
	r, err := execManifold(t.Context(), o, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("manifold %s: exit %d after %s", strings.Join(args, " "), r.code, time.Since(start).Round(time.Millisecond))
	return r
}

// wantCode fails the test when r did not exit with code.
func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got:\n%s", code, r)
	}
}

// report is the run report as `manifold apply --output json` prints it:
// the documented contract, decoded by a client that knows only the README.
type report struct {
	RunID           string           `json:"run_id"`
	Manifest        string           `json:"manifest"`
	Status          string           `json:"status"`
	Noop            bool             `json:"noop"`
	HealthCheckOnly bool             `json:"health_check_only"`
	Depth           int              `json:"depth"`
	DurationMS      int64            `json:"duration_ms"`
	TraceID         string           `json:"trace_id"`
	Counts          counts           `json:"counts"`
	Resources       []resourceReport `json:"resources"`
	Trigger         string           `json:"trigger"`
}

// counts sums a report's resources by status.
type counts struct {
	Total   int `json:"total"`
	Changed int `json:"changed"`
	Stable  int `json:"stable"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// resourceReport is one resource's entry in a report.
type resourceReport struct {
	Ref        string  `json:"ref"`
	Type       string  `json:"type"`
	Name       string  `json:"name"`
	Alias      string  `json:"alias"`
	Status     string  `json:"status"`
	Noop       bool    `json:"noop"`
	Refreshed  bool    `json:"refreshed"`
	Message    string  `json:"message"`
	Error      string  `json:"error"`
	DurationMS int64   `json:"duration_ms"`
	Worker     string  `json:"worker"`
	Child      *report `json:"child"`
}

// resource returns the entry of ref, failing the test when there is none.
func (r *report) resource(t *testing.T, ref string) resourceReport {
	t.Helper()
	for _, res := range r.Resources {
		if res.Ref == ref {
			return res
		}
	}
	t.Fatalf("report has no resource %s: %+v", ref, r.Resources)
	return resourceReport{}
}

// statuses returns ref → status for every resource in the report.
func (r *report) statuses() map[string]string {
	m := make(map[string]string, len(r.Resources))
	for _, res := range r.Resources {
		m[res.Ref] = res.Status
	}
	return m
}

// apply runs `manifold apply --output json args...`, checks the exit code
// and decodes the run report from stdout.
func apply(t *testing.T, o runOpts, code int, args ...string) *report {
	t.Helper()
	r := runWith(t, o, append([]string{"apply", "--output", "json"}, args...)...)
	wantCode(t, r, code)
	return decodeReport(t, r)
}

// decodeReport decodes the run report printed on r's stdout.
func decodeReport(t *testing.T, r result) *report {
	t.Helper()
	var rep report
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not a run report: %v\n%s", err, r)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON object:\n%s", r)
	}
	return &rep
}

// writeFile writes content to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// readFile returns the content of path, failing the test when it cannot
// be read.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantAbsent fails the test when path exists.
func wantAbsent(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s: want it absent, Lstat says %v", path, err)
	}
}

// wantFile fails the test unless path is a regular file with content and
// permission bits mode.
func wantFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() {
		t.Fatalf("%s: want a regular file, got mode %s", path, fi.Mode())
	}
	if got := fi.Mode().Perm(); got != mode {
		t.Errorf("%s: want mode %#o, got %#o", path, mode, got)
	}
	if got := readFile(t, path); got != content {
		t.Errorf("%s: want content %q, got %q", path, content, got)
	}
}

// isolatedTmp returns runOpts whose TMPDIR is a fresh directory, so a test
// can check that the embedded engine left nothing behind.
func isolatedTmp(t *testing.T) (runOpts, string) {
	t.Helper()
	tmp := t.TempDir()
	return runOpts{env: []string{"TMPDIR=" + tmp}}, tmp
}

// wantEmptyDir fails the test when dir holds anything.
func wantEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 0 {
		names := make([]string, len(entries))
		for i, e := range entries {
			names[i] = e.Name()
		}
		t.Fatalf("%s: want it empty, holds %v", dir, names)
	}
}

// process is a manifold process running in the background (a server, a
// worker), stopped when the test ends.
type process struct {
	cmd    *exec.Cmd
	done   chan struct{}
	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
	err    error
}

// lockedWriter serialises writes of a process's two output streams.
type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// start starts the binary in the background with args. The process gets
// SIGTERM (then SIGKILL after 10 s) when the test ends, unless it has
// exited already.
func start(t testing.TB, o runOpts, args ...string) *process {
	t.Helper()
	p := &process{done: make(chan struct{})}
	p.cmd = exec.Command(manifoldBin, args...)
	p.cmd.Dir = cmp.Or(o.dir, t.TempDir())
	p.cmd.Env = append(os.Environ(), o.env...)
	p.cmd.Stdout = lockedWriter{&p.mu, &p.stdout}
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start manifold %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if err := p.stop(10 * time.Second); err != nil {
			t.Errorf("manifold %s: %v", strings.Join(args, " "), err)
		}
		if t.Failed() {
			t.Logf("manifold %s:\n--- stdout:\n%s--- stderr:\n%s", strings.Join(args, " "), p.output(&p.stdout), p.output(&p.stderr))
		}
	})
	return p
}

// stop sends SIGTERM and waits up to grace for the process to exit, then
// kills it. It returns an error only when the process had to be killed.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("did not exit within %s of SIGTERM; killed", grace)
	}
}

// wait waits up to timeout for the process to exit and returns its exit
// code.
func (p *process) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("manifold did not exit within %s", timeout)
		return -1
	}
}

// Stdout returns what the process printed on stdout so far.
func (p *process) Stdout() string { return p.output(&p.stdout) }

// Stderr returns what the process printed on stderr so far.
func (p *process) Stderr() string { return p.output(&p.stderr) }

func (p *process) output(b *bytes.Buffer) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return b.String()
}

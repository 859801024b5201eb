package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// violationLog is a nats-server logger that records permission violations.
type violationLog struct {
	mu         sync.Mutex
	violations []string
}

func (l *violationLog) record(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if strings.Contains(strings.ToLower(msg), "violation") {
		l.mu.Lock()
		l.violations = append(l.violations, msg)
		l.mu.Unlock()
	}
}

func (l *violationLog) Noticef(format string, v ...any) { l.record(format, v...) }
func (l *violationLog) Warnf(format string, v ...any)   { l.record(format, v...) }
func (l *violationLog) Fatalf(format string, v ...any)  { l.record(format, v...) }
func (l *violationLog) Errorf(format string, v ...any)  { l.record(format, v...) }
func (l *violationLog) Debugf(format string, v ...any)  {}
func (l *violationLog) Tracef(format string, v ...any)  {}

// take returns the violations recorded so far and forgets them.
func (l *violationLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.violations
	l.violations = nil
	return v
}

// startNATS starts nats-server in process from nats/nats-server.conf, on a
// free loopback port with its store in a temporary directory.
func startNATS(t *testing.T) (string, *violationLog) {
	t.Helper()
	opts, err := server.ProcessConfigFile(filepath.Join("nats", "nats-server.conf"))
	require.NoError(t, err)
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.HTTPPort = 0
	opts.StoreDir = t.TempDir()
	opts.NoSigs = true
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	log := &violationLog{}
	s.SetLoggerV2(log, false, false, false)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second), "nats-server not ready")
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL(), log
}

// service is a long-running manifold process.
type service struct {
	cmd    *exec.Cmd
	ready  chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	output strings.Builder
}

// startService starts `manifold args...` and closes ready when a line of its
// stderr contains readyLine.
func startService(t *testing.T, readyLine string, args ...string) *service {
	t.Helper()
	s := &service{cmd: exec.Command(manifoldBin, args...), ready: make(chan struct{}), done: make(chan struct{})}
	s.cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_TRACES_EXPORTER=none")
	stderr, err := s.cmd.StderrPipe()
	require.NoError(t, err)
	s.cmd.Stdout = nil
	require.NoError(t, s.cmd.Start())
	go func() {
		defer close(s.done)
		once := sync.Once{}
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.output.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if strings.Contains(sc.Text(), readyLine) {
				once.Do(func() { close(s.ready) })
			}
		}
	}()
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	return s
}

func (s *service) logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.output.String()
}

func (s *service) waitReady(t *testing.T, name string) {
	t.Helper()
	select {
	case <-s.ready:
	case <-s.done:
		t.Fatalf("%s exited before it was ready:\n%s", name, s.logs())
	case <-time.After(20 * time.Second):
		t.Fatalf("%s not ready after 20s:\n%s", name, s.logs())
	}
}

// stop sends SIGTERM and expects a clean exit.
func (s *service) stop(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	exited := make(chan error, 1)
	go func() { <-s.done; exited <- s.cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err, "%s:\n%s", name, s.logs())
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not stop within 20s of SIGTERM:\n%s", name, s.logs())
	}
}

// TestRolePermissions runs a coordinator, a worker and the client commands
// as the users of nats/accounts.conf against nats-server.conf: everything
// manifold does must pass without a single permission violation, and what a
// role must not do is refused.
func TestRolePermissions(t *testing.T) {
	setNATSEnv(t)
	url, violations := startNATS(t)
	as := func(role string) []string {
		return []string{"--server", url, "--user", role, "--password", natsEnv["MANIFOLD_"+strings.ToUpper(role)+"_PASSWORD"]}
	}
	coord := startService(t, "coordinator started", append([]string{"coordinator"}, as("coordinator")...)...)
	coord.waitReady(t, "coordinator")
	work := startService(t, "worker started", append(append([]string{"worker"}, as("worker")...),
		"--pool", "default", "--concurrency", "2", "--cache-dir", t.TempDir())...)
	work.waitReady(t, "worker")

	manifest := filepath.Join(moduleRoot, "examples", "hello", "manifest.yaml")
	dir := t.TempDir()
	client := func(args ...string) []string { return append(append(args[:1:1], as("client")...), args[1:]...) }

	// Bundle upload, API submit, following events.
	code, out := run(t, client("run", "--follow", "--timeout", "20s", "--data", "dir="+dir+"/a", manifest)...)
	require.Equal(t, 0, code, out)
	require.FileExists(t, filepath.Join(dir, "a", "motd"))
	// Fire and forget on manifold.runs.submit (apply with a server).
	code, out = run(t, client("apply", "--timeout", "20s", "--data", "dir="+dir+"/b", manifest)...)
	require.Equal(t, 0, code, out)
	require.FileExists(t, filepath.Join(dir, "b", "motd"))
	// A task too large for one message travels by reference: the
	// coordinator stores it in manifold-tasks, the worker reads it there.
	big := strings.Repeat("0123456789abcdef", 80<<10) // 1.25 MiB
	bigManifest := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(bigManifest, []byte("resources:\n  - {type: file, name: \""+dir+"/big.txt\", content: \""+big+"\", ensure: present}\n"), 0o644))
	code, out = run(t, client("run", "--follow", "--timeout", "20s", bigManifest)...)
	require.Equal(t, 0, code, out)
	got, err := os.ReadFile(filepath.Join(dir, "big.txt"))
	require.NoError(t, err)
	require.Equal(t, big, string(got))
	// The report, then status, runs, workers, cancel.
	code, out = run(t, client("run", "--output", "json", "--timeout", "20s", "--data", "dir="+dir+"/c", manifest)...)
	require.Equal(t, 0, code, out)
	var report struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &report), out)
	require.Equal(t, "succeeded", report.Status, out)
	for _, args := range [][]string{{"status", report.RunID}, {"runs"}, {"workers"}} {
		code, out = run(t, client(args...)...)
		require.Equal(t, 0, code, "manifold %v:\n%s", args, out)
	}
	code, out = run(t, client("cancel", report.RunID)...)
	require.NotEqual(t, 3, code, "cancel of a finished run should be refused by the coordinator, not fail on the bus:\n%s", out)
	// Assignments: the client assigns, lists and unassigns; the worker
	// watches and reads them and asks the coordinators for its runs.
	code, out = run(t, client("assign", "--pool", "default", "--interval", "1h", "--data", "dir="+dir+"/e", "hello", manifest)...)
	require.Equal(t, 0, code, out)
	require.True(t, waitAssignment(t, url, "hello", func(state string) bool { return state == "converged" }),
		"the worker did not converge assignment hello; violations: %v\nworker:\n%s\ncoordinator:\n%s", violations.take(), work.logs(), coord.logs())
	require.FileExists(t, filepath.Join(dir, "e", "motd"))
	code, out = run(t, client("assignments")...)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "hello")
	code, out = run(t, client("unassign", "hello")...)
	require.Equal(t, 0, code, out)
	require.True(t, waitAssignment(t, url, "hello", func(state string) bool { return state == "" }),
		"the worker did not drop assignment hello; worker:\n%s", work.logs())

	// Clean shutdown: the worker deregisters, the coordinator hands off.
	work.stop(t, "worker")
	coord.stop(t, "coordinator")
	require.Empty(t, violations.take(), "manifold needed a subject its role may not use")

	// What each role must not do.
	denied := []struct {
		role, subject string
	}{
		{"client", "manifold.tasks.default"}, // only coordinators dispatch tasks
		{"client", "manifold.outcomes.r1"},   // only workers report outcomes
		{"client", "$KV.manifold-runs.r1"},   // run records are the coordinator's
		{"client", "$JS.API.STREAM.DELETE.MANIFOLD_TASKS"},
		{"worker", "manifold.runs.submit"},        // workers do not start runs
		{"worker", "manifold.api.runs.cancel"},    // nor use the API
		{"worker", "$KV.manifold-runs.r1"},        // nor touch run records
		{"worker", "$KV.manifold-cancels.r1"},     // nor cancel runs
		{"worker", "$KV.manifold-assignments.a1"}, // workers only read assignments
		{"worker", "$JS.API.STREAM.CREATE.MANIFOLD_X"},
		// Tasks sent by reference are written by coordinators alone.
		{"worker", "$O.manifold-tasks.M.task-sha256-x"},
		{"client", "$O.manifold-tasks.C.x"},
		{"client", "$JS.API.DIRECT.GET.OBJ_manifold-tasks"},
		// Only workers register services (a client cannot forge an entry).
		{"client", "manifold.registrations.production.http.web.10_0_0_1.x"},
	}
	conns := map[string]*nats.Conn{}
	for _, role := range []string{"client", "worker"} {
		nc, err := nats.Connect(url, nats.UserInfo(role, natsEnv["MANIFOLD_"+strings.ToUpper(role)+"_PASSWORD"]),
			nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		require.NoError(t, err)
		defer nc.Close()
		conns[role] = nc
	}
	for _, d := range denied {
		nc := conns[d.role]
		require.NoError(t, nc.Publish(d.subject, []byte("{}")))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		require.NoError(t, nc.FlushWithContext(ctx))
		cancel()
		got := violations.take()
		require.Len(t, got, 1, "%s publishing %s: want one violation", d.role, d.subject)
		require.Contains(t, got[0], d.subject)
	}
	// Subscriptions are limited too: a client cannot read tasks or
	// cancellations directly.
	for _, s := range []struct{ role, subject string }{{"client", "manifold.tasks.>"}, {"worker", "manifold.api.>"},
		{"worker", "_INBOX.>"}} { // a worker cannot read coordinators' and clients' replies
		nc := conns[s.role]
		_, err := nc.SubscribeSync(s.subject)
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		got := violations.take()
		require.Len(t, got, 1, "%s subscribing to %s: want one violation", s.role, s.subject)
	}
}

// waitAssignment watches the workers bucket (as the coordinator) until a
// worker's state of the assignment satisfies ok ("" when it has none),
// for up to 30s.
func waitAssignment(t *testing.T, url, name string, ok func(state string) bool) bool {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserInfo("coordinator", natsEnv["MANIFOLD_COORDINATOR_PASSWORD"]))
	require.NoError(t, err)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, "manifold-workers")
	require.NoError(t, err)
	w, err := kv.WatchAll(ctx)
	require.NoError(t, err)
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return false
		case e := <-w.Updates():
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var reg struct {
				Assignments map[string]struct {
					State string `json:"state"`
				} `json:"assignments"`
			}
			if json.Unmarshal(e.Value(), &reg) == nil && ok(reg.Assignments[name].State) {
				return true
			}
		}
	}
}

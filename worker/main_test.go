package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/schemas"
	"github.com/manifold-run/manifold/worker"
)

// TestMain checks that no goroutine outlives the tests: every test stops its
// worker, connections and embedded server in cleanup.
func TestMain(m *testing.M) {
	// nats.go's async publishing leaves this goroutine blocked on a nil
	// channel for the life of the process (jetstream/publish.go).
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}

// waitDeadline bounds every wait of these tests.
const waitDeadline = 15 * time.Second

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("MANIFOLD_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testBundle is a real embedded JetStream with a bus; the test drives the
// worker by publishing tasks and reading outcomes itself.
type testBundle struct {
	srv *bus.Server
	bus *bus.Bus
	// runID is the run every task of the test belongs to.
	runID string
	// outcomes reads the run's outcomes.
	outcomes *bus.Consumer
}

func setup(t *testing.T, cfg bus.Config) *testBundle {
	t.Helper()
	srv, b := bustest.Start(t, cfg)
	tb := &testBundle{srv: srv, bus: b, runID: "run-" + strings.ReplaceAll(t.Name(), "/", "-")}
	var err error
	tb.outcomes, err = b.OutcomeConsumer(t.Context(), tb.runID)
	require.NoError(t, err)
	return tb
}

// start starts a worker with cfg (Bus and Registry filled in, Logger and
// Name when empty); cleanup kills it.
func (tb *testBundle) start(t *testing.T, cfg worker.Config) *worker.Worker {
	t.Helper()
	cfg.Bus, cfg.Registry = tb.bus, builtin.Registry()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.Name == "" {
		cfg.Name = "w1"
	}
	w, err := worker.New(cfg)
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() { within(t, "Kill", w.Kill) })
	return w
}

// within runs a blocking call (Stop, Kill) and fails the test if it does
// not return before the deadline, rather than hanging the test binary.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(waitDeadline):
		t.Fatalf("%s did not return within %s", what, waitDeadline)
	}
}

// task returns a task of the test's run for res.
func (tb *testBundle) task(n int, res schemas.Resource) bus.Task {
	return bus.Task{RunID: tb.runID, RootRunID: tb.runID, Task: n, Attempt: 1, Manifest: "m.yaml",
		Resource: res, Pool: bus.DefaultPool, TimeoutMS: 30_000, Deadline: time.Now().Add(time.Minute)}
}

func (tb *testBundle) publish(t *testing.T, task bus.Task) {
	t.Helper()
	require.NoError(t, tb.bus.PublishTask(t.Context(), task))
}

// publishRaw publishes data on the pool's task subject without a message
// ID, as a duplicate delivery or a foreign client would.
func (tb *testBundle) publishRaw(t *testing.T, pool string, data []byte) {
	t.Helper()
	require.NoError(t, tb.bus.Conn().Publish(bus.TaskSubject(pool), data))
	require.NoError(t, tb.bus.Conn().Flush())
}

// next returns the next outcome of the run, failing the test after the
// deadline.
func (tb *testBundle) next(t *testing.T) bus.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitDeadline)
	defer cancel()
	d, err := tb.outcomes.Next(ctx)
	require.NoError(t, err, "no outcome in time")
	var o bus.Outcome
	require.NoError(t, bus.Decode(d.Data(), &o))
	require.NoError(t, d.Ack(ctx))
	return o
}

// none asserts that no outcome arrives within d (used only after the
// outcome that would have come first has been read).
func (tb *testBundle) none(t *testing.T, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	del, err := tb.outcomes.Next(ctx)
	if err == nil {
		var o bus.Outcome
		_ = bus.Decode(del.Data(), &o)
		t.Fatalf("unexpected outcome: %+v", o)
	}
}

// shell returns an exec resource running line with /bin/sh in dir.
func shell(name, dir, line string) schemas.Resource {
	return schemas.Resource{Type: "exec", Name: name, Provider: "shell",
		Properties: map[string]any{"command": line, "cwd": dir}}
}

// eventually waits for cond, checking every 10ms, failing the test after
// the deadline. It is for conditions outside the bus (files written by
// commands), which signal nothing.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Fields(string(data))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

package coordinator_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// TestMain checks that no goroutine outlives the tests: every test stops its
// coordinator, worker, connections and embedded server in cleanup.
func TestMain(m *testing.M) {
	// nats.go's async publishing leaves this goroutine blocked on a nil
	// channel for the life of the process (jetstream/publish.go).
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}

// runDeadline bounds every run a test waits for.
const runDeadline = 20 * time.Second

// testLogger discards logs unless MANIFOLD_TEST_LOG is set.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("MANIFOLD_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testBundle is one real embedded JetStream server with a coordinator and,
// unless opted out, a worker of the default pool.
type testBundle struct {
	srv    *bus.Server
	bus    *bus.Bus
	coord  *coordinator.Coordinator
	worker *worker.Worker
}

type setupOpts struct {
	// bus configures the bus; zero values are the defaults.
	bus bus.Config
	// coord is the coordinator's config; Bus and Logger are filled in.
	coord coordinator.Config
	// noWorker starts no worker: the test answers tasks itself.
	noWorker bool
	// concurrency of the worker; defaults to 2.
	concurrency int
}

// setupBus starts a server and opens a bus with the default config.
func setupBus(t *testing.T) (*bus.Server, *bus.Bus) {
	t.Helper()
	return bustest.Start(t, bus.Config{})
}

func setup(t *testing.T, o setupOpts) *testBundle {
	t.Helper()
	srv, b := bustest.Start(t, o.bus)
	tb := &testBundle{srv: srv, bus: b}
	ctx := t.Context()

	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := o.coord
	cfg.Bus, cfg.Logger, cfg.TracerProvider = b, testLogger(t), tp
	cfg.Name = "coord-test"
	c, err := coordinator.New(cfg)
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { within(t, "coordinator Stop", c.Stop) })
	tb.coord = c

	if !o.noWorker {
		w, err := worker.New(worker.Config{Bus: b, Registry: builtin.Registry(), Name: "worker-test",
			Concurrency: max(o.concurrency, 2), Logger: testLogger(t), TracerProvider: tp})
		require.NoError(t, err)
		require.NoError(t, w.Start(ctx))
		t.Cleanup(func() { within(t, "worker Kill", w.Kill) })
		tb.worker = w
	}
	return tb
}

// within runs a blocking call (Stop, Kill) and fails the test if it does
// not return within runDeadline, rather than hanging the test binary.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(runDeadline):
		t.Fatalf("%s did not return within %s", what, runDeadline)
	}
}

// submit submits a manifest as a run and returns its run ID.
func (tb *testBundle) submit(t *testing.T, manifest string, mod ...func(*bus.RunRequest)) string {
	t.Helper()
	req := bus.RunRequest{RunID: coordinator.NewRunID(), ManifestName: "m.yaml", ManifestYAML: manifest}
	for _, f := range mod {
		f(&req)
	}
	require.NoError(t, tb.bus.SubmitRun(t.Context(), req, req.RunID))
	return req.RunID
}

// wait follows a run's events until run_finished (failing the test after
// runDeadline) and returns them with the run's report.
func (tb *testBundle) wait(t *testing.T, runID string) (*coordinator.Report, []bus.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runDeadline)
	defer cancel()
	var events []bus.Event
	err := tb.bus.FollowEvents(ctx, runID, func(ev bus.Event) bool {
		events = append(events, ev)
		return ev.Kind != bus.EventRunFinished || ev.RunID != runID
	})
	require.NoError(t, err, "run %s did not finish; events so far: %+v", runID, events)
	rep, err := coordinator.GetReport(t.Context(), tb.bus, runID)
	require.NoError(t, err)
	return rep, events
}

// run submits a manifest and waits for its report.
func (tb *testBundle) run(t *testing.T, manifest string, mod ...func(*bus.RunRequest)) *coordinator.Report {
	t.Helper()
	rep, _ := tb.wait(t, tb.submit(t, manifest, mod...))
	return rep
}

func noop(r *bus.RunRequest) { r.Noop = true }

// resource returns the report line of ref, failing the test if absent.
func resource(t *testing.T, rep *coordinator.Report, ref string) coordinator.ResourceReport {
	t.Helper()
	for _, r := range rep.Resources {
		if r.Ref == ref {
			return r
		}
	}
	t.Fatalf("report has no %s: %+v", ref, rep.Resources)
	return coordinator.ResourceReport{}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func lines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	n := 0
	for _, c := range data {
		if c == '\n' {
			n++
		}
	}
	return n
}

func join(dir, name string) string { return filepath.Join(dir, name) }

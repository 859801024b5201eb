package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// startCoordinator starts a coordinator on its own connection to srv and
// returns it with that connection's bus.
func startCoordinator(t *testing.T, srv *bus.Server, name string, lease time.Duration) (*coordinator.Coordinator, *bus.Bus) {
	t.Helper()
	b := bustest.Open(t, srv, bus.Config{})
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	c, err := coordinator.New(coordinator.Config{Bus: b, Name: name, Logger: testLogger(t), TracerProvider: tp,
		Lease: lease, ScanInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(c.Stop)
	return c, b
}

func startWorker(t *testing.T, b *bus.Bus) {
	t.Helper()
	w, err := worker.New(worker.Config{Bus: b, Registry: builtin.Registry(), Name: "worker-test", Concurrency: 2,
		Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(w.Kill)
}

// waitForEvent follows a run until pred matches an event.
func waitForEvent(t *testing.T, b *bus.Bus, runID string, pred func(bus.Event) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runDeadline)
	defer cancel()
	require.NoError(t, b.FollowEvents(ctx, runID, func(ev bus.Event) bool { return !pred(ev) }))
}

func twoStepManifest(dir string) string {
	return fmt.Sprintf(`
resources:
  - exec:
      - first:
          command: "/bin/sh -c 'echo x >> %[1]s/first'"
      - second:
          command: "/bin/sh -c 'echo x >> %[1]s/second'"
`, dir)
}

func TestStandbyResumesTheRunOfACrashedCoordinator(t *testing.T) {
	srv, b := bustest.Start(t, bus.Config{})
	a, busA := startCoordinator(t, srv, "coord-a", 500*time.Millisecond)
	dir := t.TempDir()
	tb := &testBundle{srv: srv, bus: b}
	runID := tb.submit(t, twoStepManifest(dir))
	// No worker yet: the first task waits, dispatched, in its pool.
	waitForEvent(t, b, runID, func(ev bus.Event) bool { return ev.Kind == bus.EventTaskDispatched })

	// Crash: the coordinator's connection dies with it, so it cannot hand
	// the run off; its lease must lapse.
	busA.Conn().Close()
	a.Stop()

	// The standby publishes the task in flight again, marked resumed, so
	// a worker looks for a recorded outcome before executing it.
	tasks := make(chan *nats.Msg, 16)
	sub, err := b.Conn().ChanSubscribe(bus.TaskSubject(bus.DefaultPool), tasks)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, b.Conn().Flush())
	startCoordinator(t, srv, "coord-b", 500*time.Millisecond)
	// The crashed coordinator's own publication may still reach the
	// subscription first (the server reads its connection apart from
	// ours): it is the one not marked resumed.
	deadline := time.After(runDeadline)
	for resumed := false; !resumed; {
		select {
		case msg := <-tasks:
			var task bus.Task
			require.NoError(t, json.Unmarshal(msg.Data, &task))
			require.Equal(t, 0, task.Task, "%s", msg.Data)
			resumed = task.Resumed
		case <-deadline:
			t.Fatal("the standby did not publish the task in flight again, marked resumed")
		}
	}
	startWorker(t, b)
	rep, _ := tb.wait(t, runID)
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
	require.Equal(t, 2, rep.Counts.Changed)
	// Dispatched again by the standby, but executed once.
	require.Equal(t, 1, lines(t, join(dir, "first")))
	require.Equal(t, 1, lines(t, join(dir, "second")))
}

func TestStoppingCoordinatorHandsItsRunsOff(t *testing.T) {
	srv, b := bustest.Start(t, bus.Config{})
	// A lease far longer than the test's deadline: only a hand-off lets the
	// standby resume in time.
	a, _ := startCoordinator(t, srv, "coord-a", time.Minute)
	dir := t.TempDir()
	tb := &testBundle{srv: srv, bus: b}
	runID := tb.submit(t, twoStepManifest(dir))
	waitForEvent(t, b, runID, func(ev bus.Event) bool { return ev.Kind == bus.EventTaskDispatched })
	a.Stop()

	startCoordinator(t, srv, "coord-b", time.Minute)
	startWorker(t, b)
	t.Cleanup(func() {
		if t.Failed() { // what the standby found
			e, err := b.Runs().Get(context.Background(), "run."+runID)
			if err == nil {
				t.Logf("run header: %s", e.Value)
			}
		}
	})
	rep, _ := tb.wait(t, runID)
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
	require.Equal(t, 1, lines(t, join(dir, "first")))
	require.Equal(t, 1, lines(t, join(dir, "second")))
}

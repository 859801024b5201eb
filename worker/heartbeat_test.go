package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/schemas"
	"github.com/manifold-run/manifold/worker"
)

// entryWrites subscribes to the writes of worker name's entry in the
// workers bucket (each Put and Delete is published on its subject).
func entryWrites(t *testing.T, b *bus.Bus, name string) chan *nats.Msg {
	t.Helper()
	ch := make(chan *nats.Msg, 1024)
	sub, err := b.Conn().ChanSubscribe("$KV."+bus.BucketWorkers+"."+name, ch)
	require.NoError(t, err)
	require.NoError(t, b.Conn().Flush())
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return ch
}

// nextEntry returns the next entry written, failing on a delete or after
// the deadline.
func nextEntry(t *testing.T, writes chan *nats.Msg) worker.Registration {
	t.Helper()
	select {
	case m := <-writes:
		require.Empty(t, m.Header.Get("KV-Operation"), "the entry of a live worker was deleted")
		var reg worker.Registration
		require.NoError(t, json.Unmarshal(m.Data, &reg))
		return reg
	case <-time.After(waitDeadline):
		t.Fatal("no write of the entry in time")
		return worker.Registration{}
	}
}

// TestHeartbeatWritesAnUnchangedEntryOncePerThirdOfTTL: a worker looking
// for changes every 20 ms writes its entry only every third of the
// bucket's TTL (3 s: 1 s) while nothing readers act on changed, so the
// entry never expires and is not rewritten at every look; a task it runs
// (its running tasks, its last run) does not write the entry before the
// keep-alive, which then carries its last run.
func TestHeartbeatWritesAnUnchangedEntryOncePerThirdOfTTL(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{WorkerTTL: 3 * time.Second})
	writes := entryWrites(t, tb.bus, "w1")
	// Without assignments, which write the entry when their state
	// changes (assign.go).
	tb.start(t, worker.Config{Name: "w1", HeartbeatCheck: 20 * time.Millisecond, DisableAssignments: true})
	prev := nextEntry(t, writes) // Start's
	task := tb.task(1, schemas.Resource{Type: "file", Name: filepath.Join(t.TempDir(), "f"), Ensure: "present",
		Properties: map[string]any{"content": "x\n"}})
	task.Pool = bus.PinnedPool("w1")
	tb.publish(t, task)
	require.Equal(t, bus.TaskChanged, tb.next(t).Status)
	for range 4 { // 3 s and more: past the TTL
		reg := nextEntry(t, writes)
		gap := reg.Seen.Sub(prev.Seen)
		require.GreaterOrEqual(t, gap, 900*time.Millisecond, "an entry rewritten before its keep-alive was due")
		prev = reg
	}
	require.NotNil(t, prev.Fleet, "the keep-alive carries the last run")
	require.Equal(t, tb.runID, prev.Fleet.LastRun.RunID)
	// Past the TTL since the first write: still there (the last write
	// may not be stored yet when its copy reaches the subscription).
	_, err := tb.bus.Workers().Get(t.Context(), "w1")
	require.NoError(t, err, "a live worker's entry must not expire")
}

// TestHeartbeatWritesChangedFactsAtOnce: with the default TTL (the entry
// kept alive every 20 s), refreshed facts are written at the next look
// for changes, not at the next keep-alive (a fan-out compiles the host's
// run with them); a refresh that finds the same facts writes nothing.
func TestHeartbeatWritesChangedFactsAtOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	require.Equal(t, bus.DefaultWorkerTTL, tb.bus.Config().WorkerTTL)
	writes := entryWrites(t, tb.bus, "w1")
	var gen atomic.Int64
	gen.Store(1)
	refreshed := make(chan struct{}, 1024)
	tb.start(t, worker.Config{Name: "w1", HeartbeatCheck: 20 * time.Millisecond, DisableAssignments: true,
		Facts: map[string]any{"gen": 1}, FactsInterval: 20 * time.Millisecond,
		GatherFacts: func(context.Context) (map[string]any, error) {
			defer func() { refreshed <- struct{}{} }()
			return map[string]any{"gen": gen.Load()}, nil
		}})
	first := nextEntry(t, writes)
	require.EqualValues(t, 1, first.Facts["gen"])
	for range 5 { // refreshes of the same facts
		select {
		case <-refreshed:
		case <-time.After(waitDeadline):
			t.Fatal("no facts refresh")
		}
	}
	gen.Store(2)
	reg := nextEntry(t, writes)
	require.EqualValues(t, 2, reg.Facts["gen"], "an entry written with unchanged facts before the keep-alive")
	require.Less(t, reg.Seen.Sub(first.Seen), bus.DefaultWorkerTTL/3, "the change waited for the keep-alive")
}

// TestDeadWorkerExpiresWithinTTL: a worker that dies without deregistering
// (its connection gone) is live for readers of the workers bucket until
// its entry's TTL passes since its last write, then gone.
func TestDeadWorkerExpiresWithinTTL(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	srv, b := bustest.Start(t, bus.Config{WorkerTTL: ttl})
	writes := entryWrites(t, b, "dead")
	nc, err := srv.Connect("dead")
	require.NoError(t, err)
	wb, err := bus.Attach(t.Context(), nc, bus.Config{})
	require.NoError(t, err)
	require.Equal(t, ttl, wb.Config().WorkerTTL, "a worker follows the bucket's TTL")
	tb := &testBundle{srv: srv, bus: wb}
	w := tb.start(t, worker.Config{Name: "dead", HeartbeatCheck: 20 * time.Millisecond, DisableAssignments: true})
	nextEntry(t, writes)
	last := nextEntry(t, writes) // a keep-alive
	nc.Close()                   // dies: no more heartbeats, no deregistration
	within(t, "Kill", w.Kill)
	for {
		_, err := b.Workers().Get(t.Context(), "dead")
		if errors.Is(err, bus.ErrNotFound) {
			break
		}
		require.NoError(t, err)
		require.Less(t, time.Since(last.Seen), ttl+2*time.Second, "a dead worker still live past its TTL")
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			return
		}
	}
	require.GreaterOrEqual(t, time.Since(last.Seen), ttl-100*time.Millisecond, "the entry expired before its TTL")
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	keys, err := b.Workers().Keys(ctx)
	require.NoError(t, err)
	require.NotContains(t, keys, "dead")
}

// TestWorkersShareAPoolConsumer: workers given one bus.Consumer of their
// pool (PoolConsumers: the simulated hosts of one process) keep one pull
// waiting on the pool's consumer between them, not one each, and a task
// goes to the worker that has a free slot: while the first task holds one
// worker's only slot, the second is taken by the other.
func TestWorkersShareAPoolConsumer(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	shared, err := tb.bus.TaskConsumer(t.Context(), bus.DefaultPool)
	require.NoError(t, err)
	probe, err := tb.bus.TaskConsumer(t.Context(), bus.DefaultPool)
	require.NoError(t, err)
	for _, name := range []string{"s1", "s2", "s3"} {
		tb.start(t, worker.Config{Name: name, Concurrency: 1, DisableAssignments: true,
			PoolConsumers: map[string]*bus.Consumer{bus.DefaultPool: shared}})
	}
	waiting := func() int {
		n, _, err := probe.Waiting(t.Context())
		require.NoError(t, err)
		require.LessOrEqual(t, n, 1, "workers sharing a consumer keep more than one pull waiting")
		return n
	}
	eventually(t, "the shared pull to wait", func() bool { return waiting() == 1 })

	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	tb.publish(t, tb.task(1, shell("hold", dir, "touch held; i=0; while [ ! -e release ] && [ $i -lt 1500 ]; do sleep 0.01; i=$((i+1)); done")))
	eventually(t, "the first task to run", func() bool { return exists(filepath.Join(dir, "held")) })
	tb.publish(t, tb.task(2, shell("second", dir, "true")))
	second := tb.next(t)
	require.Equal(t, 2, second.Task)
	require.NoError(t, os.WriteFile(release, nil, 0o644))
	first := tb.next(t)
	require.Equal(t, 1, first.Task)
	require.Equal(t, bus.TaskChanged, first.Status, "%+v", first)
	require.NotEqual(t, first.Worker, second.Worker, "the busy worker's task went to another")
	eventually(t, "one pull to wait again", func() bool { return waiting() == 1 })
}

package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// TestPinnedTasksFleet: 1,100 workers (past NATS's 1,000 consumers per
// stream) each get the task pinned to them, on 11 connections of 100
// workers each, and the server holds no consumer for any of them. Before
// PinnedTasks a worker bound a durable consumer of its own and the
// 1,001st was refused (maximum consumers limit reached).
func TestPinnedTasksFleet(t *testing.T) {
	const workers, perConn = 1100, 100
	srv, b := bustest.Start(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	readers := make([]*bus.PinnedTasks, workers)
	for i := range workers {
		if i%perConn == 0 && i > 0 {
			b = bustest.Open(t, srv, bus.Config{})
		}
		var err error
		readers[i], err = b.PinnedTasks(ctx, fmt.Sprintf("host-%04d", i))
		require.NoError(t, err)
	}
	idle, stop := context.WithCancel(ctx)
	defer stop()
	got := make([]string, workers)
	var g errgroup.Group
	for i, r := range readers {
		g.Go(func() error {
			d, err := r.Next(idle)
			if err != nil {
				return fmt.Errorf("host-%04d: %w", i, err)
			}
			var task bus.Task
			if err := bus.Decode(d.Data(), &task); err != nil {
				return err
			}
			got[i] = task.RunID
			if d.Attempt != 1 {
				return fmt.Errorf("host-%04d: attempt %d", i, d.Attempt)
			}
			return d.Ack(ctx)
		})
	}
	start := time.Now()
	var pub errgroup.Group
	pub.SetLimit(32)
	for i := range workers {
		pub.Go(func() error {
			return b.PublishTask(ctx, bus.Task{RunID: fmt.Sprintf("child-%04d", i), Pool: bus.PinnedPool(fmt.Sprintf("host-%04d", i)), Manifest: "m.yaml"})
		})
	}
	require.NoError(t, pub.Wait())
	require.NoError(t, g.Wait())
	t.Logf("%d pinned tasks published and taken in %v", workers, time.Since(start))
	for i := range workers {
		require.Equal(t, fmt.Sprintf("child-%04d", i), got[i], "host-%04d got another's task", i)
	}
	info := streamInfo(t, b, bus.StreamPinned)
	require.Zero(t, info.State.Msgs, "acked pinned tasks leave the work queue")
	require.Zero(t, info.State.Consumers, "no consumer per worker")
	require.EqualValues(t, workers, info.State.LastSeq)
	// The pools' stream never stored them: its consumers' waiting pulls
	// are not woken by pinned tasks.
	require.Zero(t, streamInfo(t, b, bus.StreamTasks).State.LastSeq, "pinned tasks stored with the pools' tasks")
}

// TestPinnedTasksMixedVersions: a task pinned to a worker by a coordinator
// of an earlier version (on manifold.tasks.worker-<name>, in the pools'
// stream) is read by LegacyPinnedTasks, one of this version by
// PinnedTasks; the backlog counts both under the worker's pool. A reader
// started on a server without the pinned stream (provisioned by an
// earlier version) waits for it, and reads the task published once a
// coordinator of this version provisioned it.
func TestPinnedTasksMixedVersions(t *testing.T) {
	t.Parallel()
	srv, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	pool := bus.PinnedPool("w1")
	require.Equal(t, "manifold.pinned.w1", bus.TaskSubject(pool))
	require.Equal(t, "manifold.tasks.w1", bus.TaskSubject("w1"), "a pool named like a worker is not pinned")
	old, err := json.Marshal(bus.Task{V: bus.Version, RunID: "old", Pool: pool, Manifest: "m.yaml"})
	require.NoError(t, err)
	js, err := jetstream.New(b.Conn())
	require.NoError(t, err)
	_, err = js.Publish(ctx, bus.LegacyTaskSubject(pool), old)
	require.NoError(t, err)
	require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: "new", Pool: pool, Manifest: "m.yaml"}))
	backlog, err := b.Backlogs(ctx)
	require.NoError(t, err)
	require.Len(t, backlog, 1)
	require.Equal(t, pool, backlog[0].Pool)
	require.Equal(t, 2, backlog[0].Tasks)

	legacy, err := b.LegacyPinnedTasks(ctx, "w1")
	require.NoError(t, err)
	d, err := legacy.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "old", runOf(t, d))
	require.NoError(t, d.Ack(ctx))
	p, err := b.PinnedTasks(ctx, "w1")
	require.NoError(t, err)
	d, err = p.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "new", runOf(t, d))
	require.NoError(t, d.Ack(ctx))

	// No pinned stream: the reader waits; the stream provisioned and a
	// task published, it reads it.
	require.NoError(t, js.DeleteStream(ctx, bus.StreamPinned))
	p2, err := b.PinnedTasks(ctx, "w2")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var got *bus.Delivery
	var nextErr error
	wg.Go(func() { got, nextErr = p2.Next(ctx) })
	b2 := bustest.Open(t, srv, bus.Config{}) // a coordinator of this version
	require.NoError(t, b2.PublishTask(ctx, bus.Task{RunID: "late", Pool: bus.PinnedPool("w2"), Manifest: "m.yaml"}))
	wg.Wait()
	require.NoError(t, nextErr)
	require.Equal(t, "late", runOf(t, got))
}

// TestPinnedTasksRedelivery: a nak'd pinned task comes back with the next
// attempt; a task left by a worker that stopped is read by its successor
// as a possible redelivery (attempt 2: its recorded outcome is looked
// up); a task published while the worker waits wakes it at once, and
// ones published before it started are found without a wake.
func TestPinnedTasksRedelivery(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	pool := bus.PinnedPool("w1")
	// Published before the worker starts: found by its first read.
	require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: "early", Pool: pool, Manifest: "m.yaml"}))
	p, err := b.PinnedTasks(ctx, "w1")
	require.NoError(t, err)
	d, err := p.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "early", runOf(t, d))
	require.Equal(t, 2, d.Attempt, "there before this reader: maybe delivered before")
	require.NoError(t, d.Ack(ctx))

	// Published while the reader waits (or just before its read): handed
	// out at once, not at the idle poll minutes later (ctxT gives 20 s).
	var wg sync.WaitGroup
	var live *bus.Delivery
	wg.Go(func() { live, err = p.Next(ctx) })
	require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: "live", Pool: pool, Manifest: "m.yaml"}))
	wg.Wait()
	require.NoError(t, err)
	require.Equal(t, "live", runOf(t, live))
	require.Equal(t, 1, live.Attempt)

	// Nak: handed out again, attempt 2; the next task waits behind it.
	require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: "after", Pool: pool, Manifest: "m.yaml"}))
	require.NoError(t, live.Nak(10*time.Millisecond))
	again, err := p.Next(ctx)
	require.NoError(t, err)
	if runOf(t, again) == "after" { // handed before the nak's delay passed
		require.NoError(t, again.Ack(ctx))
		again, err = p.Next(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, "live", runOf(t, again))
	require.Equal(t, 2, again.Attempt)

	// The worker stops holding it: its successor reads it, attempt 2,
	// and whatever else is left; then nothing is.
	succ, err := b.PinnedTasks(ctx, "w1")
	require.NoError(t, err)
	seen := map[string]int{}
	for {
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		d, err := succ.Next(short)
		cancel()
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded)
			break
		}
		seen[runOf(t, d)] = d.Attempt
		require.NoError(t, d.Term("done"))
	}
	require.Equal(t, 2, seen["live"], "seen: %v", seen)
	backlog, err := b.Backlogs(ctx)
	require.NoError(t, err)
	require.Empty(t, backlog)
}

func runOf(t *testing.T, d *bus.Delivery) string {
	t.Helper()
	var task bus.Task
	require.NoError(t, bus.Decode(d.Data(), &task))
	return task.RunID
}

// BenchmarkPinnedStart compares what a worker's start costs for its
// pinned pool: a durable consumer of its own (PinnedTaskConsumer, as
// before, with the stream's consumer limit raised) or a PinnedTasks reader
// (a stream lookup; its subscription is made by the first Next). Per op:
// one worker; the server runs in process, so CPU and heap include it.
//
//	go test -run - -bench PinnedStart -benchtime 1000x ./bus/
func BenchmarkPinnedStart(b *testing.B) {
	for _, mode := range []string{"consumer", "reader"} {
		b.Run(mode, func(b *testing.B) {
			_, bb := bustest.Start(b, bus.Config{})
			ctx := context.Background()
			b.ReportAllocs()
			for i := range b.N {
				name := fmt.Sprintf("host-%05d", i)
				var err error
				if mode == "consumer" {
					_, err = bb.PinnedTaskConsumer(ctx, name)
				} else {
					var p *bus.PinnedTasks
					if p, err = bb.PinnedTasks(ctx, name); err == nil {
						short, cancel := context.WithTimeout(ctx, time.Millisecond)
						_, _ = p.Next(short) // one read, the subscription made and dropped
						cancel()
					}
				}
				if err != nil {
					b.Fatalf("worker %d: %v", i, err)
				}
			}
		})
	}
}

// TestPinnedTaskReadOncePerWake: a worker waiting for its pinned tasks
// reads the stream once per task it is woken for. The task's publication
// is the wake, so once it has handed the task out it waits for the next
// wake instead of reading again to find nothing (before: two reads per
// task, STREAM.MSG.GET.MANIFOLD_PINNED 2.0 a host in a fleet run). Tasks
// published back to back, or while the worker holds one, are all handed
// out at once: none waits for the idle poll (1-3 minutes, past the
// test's deadline).
func TestPinnedTaskReadOncePerWake(t *testing.T) {
	srv, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	obs, err := srv.Connect("observer")
	require.NoError(t, err)
	t.Cleanup(obs.Close)
	var reads atomic.Int64
	_, err = obs.Subscribe("$JS.API.STREAM.MSG.GET."+bus.StreamPinned, func(*nats.Msg) { reads.Add(1) })
	require.NoError(t, err)
	require.NoError(t, obs.Flush())

	p, err := b.PinnedTasks(ctx, "w1")
	require.NoError(t, err)
	got := make(chan *bus.Delivery)
	done := make(chan error, 1)
	go func() {
		for {
			d, err := p.Next(ctx)
			if err != nil {
				done <- err
				return
			}
			got <- d
		}
	}()
	// The first read finds nothing: the worker waits.
	require.Eventually(t, func() bool { require.NoError(t, obs.Flush()); return reads.Load() == 1 }, 10*time.Second, time.Millisecond)
	pool := bus.PinnedPool("w1")
	take := func(want ...string) {
		t.Helper()
		var runs []string
		for range want {
			select {
			case d := <-got:
				runs = append(runs, runOf(t, d))
				require.NoError(t, d.Ack(ctx))
			case <-ctx.Done():
				t.Fatalf("handed out %v of %v", runs, want)
			}
		}
		require.ElementsMatch(t, want, runs)
	}
	const rounds = 40
	for i := range rounds {
		require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: fmt.Sprintf("r%d", i), Pool: pool, Manifest: "m.yaml"}))
		take(fmt.Sprintf("r%d", i))
	}
	require.NoError(t, obs.Flush())
	t.Logf("%d reads for %d tasks", reads.Load(), rounds)
	// One read per task; a wake heard before the stream stored its task
	// reads again 2 ms later (a few in a hundred).
	require.LessOrEqual(t, reads.Load(), int64(1+rounds+rounds/4), "reads for %d tasks", rounds)

	// Three at once, and one published while the worker holds another.
	for i := range 3 {
		require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: fmt.Sprintf("burst%d", i), Pool: pool, Manifest: "m.yaml"}))
	}
	take("burst0", "burst1", "burst2")
	require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: "held", Pool: pool, Manifest: "m.yaml"}))
	d := <-got
	require.Equal(t, "held", runOf(t, d))
	require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: "while-held", Pool: pool, Manifest: "m.yaml"}))
	take("while-held")
	require.NoError(t, d.Ack(ctx))
	select {
	case err := <-done:
		t.Fatalf("reader stopped: %v", err)
	default:
	}
}

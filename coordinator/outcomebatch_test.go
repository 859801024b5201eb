package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bustest"
)

// threeStepManifest is three execs in manifest order: one segment task.
func threeStepManifest(dir string) string {
	return fmt.Sprintf(`
resources:
  - exec:
      - first:
          command: "/bin/sh -c 'echo x >> %[1]s/first'"
      - second:
          command: "/bin/sh -c 'echo x >> %[1]s/second'"
      - third:
          command: "/bin/sh -c 'echo x >> %[1]s/third'"
`, dir)
}

// takeSegment takes the next task of the default pool as a worker would
// and acks it: the test answers it itself.
func takeSegment(t *testing.T, b *bus.Bus) bus.Task {
	t.Helper()
	c, err := b.TaskConsumer(t.Context(), bus.DefaultPool)
	require.NoError(t, err)
	return takeTask(t, c)
}

// takeAndDrop takes the next task of the default pool and gives it back
// (nak): a worker that dies while executing it.
func takeAndDrop(t *testing.T, b *bus.Bus) bus.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runDeadline)
	defer cancel()
	c, err := b.TaskConsumer(ctx, bus.DefaultPool)
	require.NoError(t, err)
	d, err := c.Next(ctx)
	require.NoError(t, err, "no task dispatched in time")
	var task bus.Task
	require.NoError(t, bus.Decode(d.Data(), &task))
	require.NoError(t, d.Nak(0))
	return task
}

// answer is the outcome of item k of a segment task (0: the task itself),
// signed with token.
func answer(task bus.Task, k int, token, message string) bus.Outcome {
	o := bus.Outcome{RunID: task.RunID, Task: task.Task, Attempt: task.Attempt, Ref: task.Resource.Ref(),
		Status: bus.TaskChanged, Changed: true, Message: message, Worker: "test-worker", Delivery: 1}
	if k > 0 {
		it := task.Segment[k-1]
		o.Task, o.Attempt, o.Ref = it.Task, it.Attempt, it.Resource.Ref()
	}
	bus.SignOutcome(&o, token)
	return o
}

// token is the token of item k of a segment task (0: the task itself).
func token(task bus.Task, k int) string {
	if k == 0 {
		return task.Token
	}
	return task.Segment[k-1].Token
}

// TestResumedRunReplaysAnOutcomeBatch: a coordinator that takes over a
// run whose history holds a batch of outcomes applies each of them as the
// run's past (the batch's last one ends the replay, so none of them is
// taken as news), and the run ends with the outcomes the batch carried.
func TestResumedRunReplaysAnOutcomeBatch(t *testing.T) {
	srv, b := bustest.Start(t, bus.Config{})
	a, busA := startCoordinator(t, srv, "coord-a", 500*time.Millisecond)
	dir := t.TempDir()
	tb := &testBundle{srv: srv, bus: b}
	runID := tb.submit(t, threeStepManifest(dir))
	task := takeAndDrop(t, b)
	require.Equal(t, 0, task.Task)
	require.Len(t, task.Segment, 2, "the three execs are one segment")
	require.True(t, task.BatchOutcomes, "a segment task asks for outcome batches")

	// Crash: the coordinator cannot hand the run off; its lease lapses.
	busA.Conn().Close()
	a.Stop()
	// A worker answered the first two in one batch, then died.
	ob := b.NewOutcomeBatch(t.Context(), runID, bus.OutcomeBatchOpts{FlushAfter: -1})
	ob.Add(answer(task, 0, token(task, 0), "batched 0"))
	ob.Add(answer(task, 1, token(task, 1), "batched 1"))
	for _, p := range ob.Close() {
		require.NoError(t, p.Wait(t.Context()))
	}

	// The standby publishes the segment again once it has replayed the
	// history (the stream drops that copy: the message given back is
	// still there); only then may a worker take it.
	tasks := make(chan *nats.Msg, 16)
	sub, err := b.Conn().ChanSubscribe(bus.TaskSubject(bus.DefaultPool), tasks)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, b.Conn().Flush())
	startCoordinator(t, srv, "coord-b", 500*time.Millisecond)
	deadline := time.After(runDeadline)
	for resumed := false; !resumed; {
		select {
		case msg := <-tasks:
			var again bus.Task
			require.NoError(t, json.Unmarshal(msg.Data, &again))
			resumed = again.Resumed
		case <-deadline:
			t.Fatal("the standby did not publish the task in flight again")
		}
	}
	startWorker(t, b) // takes the segment again (delivery 2)
	rep, events := tb.wait(t, runID)
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
	require.Equal(t, 3, rep.Counts.Changed)
	for k, ref := range []string{"exec#first", "exec#second"} {
		r := resource(t, rep, ref)
		require.Equal(t, "test-worker", r.Worker, "the batch's outcome is the first of the attempt")
		require.Equal(t, fmt.Sprintf("batched %d", k), r.Message)
	}
	require.Equal(t, "worker-test", resource(t, rep, "exec#third").Worker)
	require.Equal(t, 1, lines(t, join(dir, "third")))
	// Both outcomes of the batch are the past the resuming coordinator
	// replayed: told alike (a batch read as news after its first outcome
	// would give the second a task_finished the first has not).
	finished := map[int]int{}
	for _, ev := range events {
		if ev.Kind == bus.EventTaskFinished && ev.Task != nil {
			finished[*ev.Task]++
		}
	}
	require.Equal(t, finished[0], finished[1], "task_finished events of the batch's outcomes: %v", finished)
	require.Equal(t, 1, finished[2], "%+v", events)
}

// TestForgedOutcomeInABatchIsRefused: the outcomes of a batch are checked
// one by one with their own task's token. One signed with another task's
// token (all a worker holding that task has) is refused, and the task
// takes the outcome its own worker signed; the batch's other outcomes
// apply.
func TestForgedOutcomeInABatchIsRefused(t *testing.T) {
	tb := setup(t, setupOpts{noWorker: true})
	dir := t.TempDir()
	runID := tb.submit(t, threeStepManifest(dir))
	task := takeSegment(t, tb.bus)
	require.Len(t, task.Segment, 2)

	publish := func(outs ...bus.Outcome) {
		ob := tb.bus.NewOutcomeBatch(t.Context(), runID, bus.OutcomeBatchOpts{FlushAfter: -1})
		for _, o := range outs {
			ob.Add(o)
		}
		for _, p := range ob.Close() {
			require.NoError(t, p.Wait(t.Context()))
		}
	}
	forged := answer(task, 1, token(task, 0), "forged")
	forged.Status, forged.Changed, forged.Error = bus.TaskFailed, false, "forged failure"
	publish(answer(task, 0, token(task, 0), "honest 0"), forged)
	publish(answer(task, 1, token(task, 1), "honest 1"), answer(task, 2, token(task, 2), "honest 2"))

	rep, _ := tb.wait(t, runID)
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
	for k, ref := range []string{"exec#first", "exec#second", "exec#third"} {
		r := resource(t, rep, ref)
		require.Equal(t, fmt.Sprintf("honest %d", k), r.Message, "%+v", r)
		require.Empty(t, r.Error)
	}
}

// BenchmarkSegmentOutcomes measures what a coordinator spends on the
// outcomes of a run in manifest order (1,024 files: four segments of
// 256), answered by the benchmark as a worker would, one message per
// resource (as a worker of an earlier version) or one batch per segment:
// CPU time of the whole process (coordinator, server, the answering)
// per resource, the run's intake and compile included in both.
//
//	go test ./coordinator -run '^$' -bench SegmentOutcomes -benchtime 10x
func BenchmarkSegmentOutcomes(b *testing.B) {
	const n = 1024
	var m strings.Builder
	m.WriteString("resources:\n  - file:\n")
	for i := range n {
		fmt.Fprintf(&m, "      - /nonexistent/bench/f%d: {content: \"x\\n\"}\n", i)
	}
	for _, batched := range []bool{false, true} {
		name := "one-each"
		if batched {
			name = "batched"
		}
		b.Run(name, func(b *testing.B) {
			_, bs := bustest.Start(b, bus.Config{})
			startBenchCoordinator(b, bs)
			c, err := bs.TaskConsumer(b.Context(), bus.DefaultPool)
			require.NoError(b, err)
			b.ReportAllocs()
			var cpu time.Duration
			for b.Loop() {
				c0 := cpuTime()
				runID := coordinator.NewRunID()
				require.NoError(b, bs.SubmitRun(b.Context(), bus.RunRequest{RunID: runID, ManifestName: "m.yaml", ManifestYAML: m.String()}, runID))
				ctx, cancel := context.WithTimeout(b.Context(), runDeadline)
				for answered := 0; answered < n; {
					d, err := c.Next(ctx)
					require.NoError(b, err, "answered %d", answered)
					var task bus.Task
					require.NoError(b, bus.Decode(d.Data(), &task))
					var ps []*bus.Pending
					ob := bs.NewOutcomeBatch(b.Context(), task.RunID, bus.OutcomeBatchOpts{FlushAfter: -1})
					for k := 0; k <= len(task.Segment); k++ {
						o := answer(task, k, token(task, k), "ok")
						o.Status, o.Changed = bus.TaskStable, false
						bus.SignOutcome(&o, token(task, k))
						if batched {
							ob.Add(o)
						} else {
							ps = append(ps, bs.PublishOutcomeAsync(b.Context(), o))
						}
					}
					answered += 1 + len(task.Segment)
					for _, p := range append(ps, ob.Close()...) {
						require.NoError(b, p.Wait(b.Context()))
					}
					require.NoError(b, d.Ack(b.Context()))
				}
				require.NoError(b, bs.FollowEvents(ctx, runID, func(ev bus.Event) bool { return ev.Kind != bus.EventRunFinished }))
				cancel()
				cpu += cpuTime() - c0
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/n, "cpu-µs/resource")
		})
	}
}

// startBenchCoordinator starts a coordinator on b, logging nothing.
func startBenchCoordinator(b *testing.B, bs *bus.Bus) {
	c, err := coordinator.New(coordinator.Config{Bus: bs, Name: "coord-bench", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(b, err)
	require.NoError(b, c.Start(b.Context()))
	b.Cleanup(c.Stop)
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestSegmentRunAnsweredInBatches: a run of 300 files in manifest order
// (two segments) through a real worker: the outcomes travel in a few
// messages, and what users see is as before: a task_finished event per
// resource, in order, each counting done, and a report line per
// resource.
func TestSegmentRunAnsweredInBatches(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	dir := t.TempDir()
	const n = 300
	var m strings.Builder
	m.WriteString("resources:\n  - file:\n")
	for i := range n {
		fmt.Fprintf(&m, "      - %s/f%03d: {content: \"%d\\n\"}\n", dir, i, i)
	}
	runID := coordinator.NewRunID()
	msgs := make(chan *nats.Msg, 2*n)
	sub, err := tb.bus.Conn().ChanSubscribe(bus.OutcomeSubject(runID), msgs)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, tb.bus.Conn().Flush())
	tb.submit(t, m.String(), func(r *bus.RunRequest) { r.RunID = runID })
	rep, events := tb.wait(t, runID)
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
	require.Equal(t, n, rep.Counts.Changed)
	require.Len(t, rep.Resources, n)

	done := 0
	for _, ev := range events {
		if ev.Kind != bus.EventTaskFinished {
			continue
		}
		require.NotNil(t, ev.Task)
		require.Equal(t, done, *ev.Task, "task_finished in order")
		done++
		require.Equal(t, done, ev.Done)
		require.Equal(t, "changed", ev.Status)
		require.Equal(t, "worker-test", ev.Worker)
	}
	require.Equal(t, n, done, "a task_finished per resource")

	outcomes, messages := 0, 0
	for len(msgs) > 0 {
		var o bus.Outcome
		require.NoError(t, bus.Decode((<-msgs).Data, &o))
		messages++
		if o.Kind == bus.FactBatch {
			outcomes += len(o.Outcomes)
		} else {
			outcomes++
		}
	}
	require.Equal(t, n, outcomes)
	// Two segments: two batches, a few more if a batch was published
	// after BatchFlushAfter on a loaded machine.
	require.Less(t, messages, 20, "outcome messages for %d resources", n)
}

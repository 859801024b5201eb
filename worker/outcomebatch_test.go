package worker_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/schemas"
	"github.com/manifold-run/manifold/worker"
)

// signedSegment returns a segment task of rs whose attempts carry their
// tokens under secret, as a coordinator signs them.
func (tb *testBundle) signedSegment(t *testing.T, secret []byte, rs ...schemas.Resource) bus.Task {
	t.Helper()
	task := tb.segment(rs...)
	task.Token = bus.TaskToken(secret, tb.runID, task.Task, task.Attempt)
	for i := range task.Segment {
		it := &task.Segment[i]
		it.Token = bus.TaskToken(secret, tb.runID, it.Task, it.Attempt)
	}
	return task
}

// nextOutcomes returns the outcomes of the run's next message: those of a
// batch, or the single one.
func (tb *testBundle) nextOutcomes(t *testing.T) []bus.Outcome {
	t.Helper()
	o := tb.next(t)
	if o.Kind == bus.FactBatch {
		return o.Outcomes
	}
	return []bus.Outcome{o}
}

// plainFiles returns n converged files of no particular owner.
func plainFiles(t *testing.T, n int) []schemas.Resource {
	rs := convergedFiles(t, t.TempDir(), n)
	for i := range rs {
		delete(rs[i].Properties, "owner")
		delete(rs[i].Properties, "group")
	}
	return rs
}

// historyMessages reads the run's history and returns its entries and
// the number of messages they came in.
func (tb *testBundle) historyMessages(t *testing.T) ([]bus.HistoryEntry, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitDeadline)
	defer cancel()
	var es []bus.HistoryEntry
	seqs := map[uint64]bool{}
	require.NoError(t, tb.bus.ReadHistory(ctx, tb.runID, func(e bus.HistoryEntry) {
		es = append(es, e)
		seqs[e.Seq] = true
	}))
	return es, len(seqs)
}

// TestSegmentOutcomesInOneMessage: a segment task from a coordinator that
// reads batches is answered by one message carrying every resource's
// outcome in order, each signed with its own task's token.
func TestSegmentOutcomesInOneMessage(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{})
	secret, err := bus.NewRunSecret()
	require.NoError(t, err)
	const n = 40
	task := tb.signedSegment(t, secret, plainFiles(t, n)...)
	task.BatchOutcomes = true
	tb.publish(t, task)
	var got []bus.Outcome
	for len(got) < n {
		got = append(got, tb.nextOutcomes(t)...)
	}
	for i, o := range got {
		require.Equal(t, i, o.Task)
		require.Equal(t, bus.TaskStable, o.Status, "%+v", o)
		require.True(t, bus.VerifyOutcome(o, bus.TaskToken(secret, tb.runID, i, 1)), "outcome %d signed with its token", i)
	}
	es, msgs := tb.historyMessages(t)
	require.Len(t, es, n)
	// One message, or a few when the machine is so loaded that a batch
	// waited BatchFlushAfter: never one per resource.
	require.LessOrEqual(t, msgs, 4, "messages for a segment of %d", n)
}

// TestSegmentOutcomesOneEachForAnOlderCoordinator: a task that does not
// ask for batches (a coordinator of an earlier version) is answered by one
// outcome message per resource, the only shape it reads.
func TestSegmentOutcomesOneEachForAnOlderCoordinator(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{})
	secret, err := bus.NewRunSecret()
	require.NoError(t, err)
	const n = 10
	tb.publish(t, tb.signedSegment(t, secret, plainFiles(t, n)...))
	for i := range n {
		o := tb.next(t)
		require.Equal(t, bus.FactOutcome, o.Kind)
		require.Equal(t, i, o.Task)
		require.True(t, bus.VerifyOutcome(o, bus.TaskToken(secret, tb.runID, i, 1)))
	}
	es, msgs := tb.historyMessages(t)
	require.Len(t, es, n)
	require.Equal(t, n, msgs)
}

// TestBatchedOutcomesDoNotWaitForALongResource: the outcomes of the
// resources before a long one are published while it runs (a batch waits
// BatchFlushAfter at most), not at the segment's end: the exec here
// cannot end before the test has read them.
func TestBatchedOutcomesDoNotWaitForALongResource(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{})
	secret, err := bus.NewRunSecret()
	require.NoError(t, err)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "gate")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	rs := append(plainFiles(t, 3), shell("wait", dir, "cat gate > /dev/null"))
	task := tb.signedSegment(t, secret, rs...)
	task.BatchOutcomes = true
	tb.publish(t, task)
	var got []bus.Outcome
	for len(got) < 3 {
		got = append(got, tb.nextOutcomes(t)...)
	}
	require.Len(t, got, 3, "only the files' outcomes: the exec waits for the gate")
	for i, o := range got {
		require.Equal(t, i, o.Task)
		require.Equal(t, bus.TaskStable, o.Status)
	}
	gate, err := os.OpenFile(fifo, os.O_WRONLY, 0) // blocks until the exec reads
	require.NoError(t, err)
	require.NoError(t, gate.Close())
	last := tb.nextOutcomes(t)
	require.Len(t, last, 1)
	require.Equal(t, 3, last[0].Task)
	require.Equal(t, bus.TaskChanged, last[0].Status, "%+v", last[0])
	require.True(t, bus.VerifyOutcome(last[0], bus.TaskToken(secret, tb.runID, 3, 1)))
}

// BenchmarkConvergedSegmentBatched is BenchmarkConvergedSegment with the
// task asking for outcome batches, as a coordinator of this version asks:
// the segment of 256 converged files is answered by one message (or a
// few, when a batch waited BatchFlushAfter) rather than 256.
//
//	go test ./worker -run '^$' -bench 'ConvergedSegment' -benchtime 20x
func BenchmarkConvergedSegmentBatched(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("owner root on the files needs root")
	}
	const n = 256
	_, bs := bustest.Start(b, bus.Config{})
	runID := "run-bench"
	got := make(chan *nats.Msg, 4096)
	sub, err := bs.Conn().ChanSubscribe(bus.OutcomeSubject(runID), got)
	require.NoError(b, err)
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	w, err := worker.New(worker.Config{Bus: bs, Registry: builtin.Registry(), Name: "w1", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(b, err)
	require.NoError(b, w.Start(b.Context()))
	b.Cleanup(w.Kill)
	rs := convergedFiles(b, b.TempDir(), n)
	for i := range rs {
		rs[i].Properties["content"] = "{{ lookup('data.greeting') }} " + rs[i].Properties["content"].(string)
		require.NoError(b, os.WriteFile(rs[i].Name, []byte("hello content "+strconv.Itoa(i)+"\n"), 0o644))
	}
	b.ReportAllocs()
	var cpu time.Duration
	msgs, attempt := 0, 0
	for b.Loop() {
		attempt++
		task := bus.Task{RunID: runID, RootRunID: runID, Task: 0, Attempt: attempt, Manifest: "m.yaml", Resource: rs[0],
			Data: map[string]any{"greeting": "hello"}, Pool: bus.DefaultPool, TimeoutMS: 30_000, Deadline: time.Now().Add(time.Minute),
			BatchOutcomes: true}
		for i, r := range rs[1:] {
			task.Segment = append(task.Segment, bus.SegmentItem{Task: i + 1, Attempt: attempt, Resource: r, TimeoutMS: 30_000})
		}
		c0 := cpuTime()
		require.NoError(b, bs.PublishTask(b.Context(), task))
		for seen := 0; seen < n; {
			select {
			case m := <-got:
				msgs++
				var o bus.Outcome
				require.NoError(b, bus.Decode(m.Data, &o))
				outs := []bus.Outcome{o}
				if o.Kind == bus.FactBatch {
					outs = o.Outcomes
				}
				for _, o := range outs {
					require.Equal(b, bus.TaskStable, o.Status, "%+v", o)
				}
				seen += len(outs)
			case <-time.After(waitDeadline):
				b.Fatal("no outcome in time")
			}
		}
		cpu += cpuTime() - c0
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/n, "cpu-µs/file")
	b.ReportMetric(float64(msgs)/float64(b.N), "msgs/segment")
}

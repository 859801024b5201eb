package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/schemas"
	"github.com/manifold-run/manifold/worker"
)

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	_, b := setupBus(t)
	tests := []struct {
		name string
		cfg  worker.Config
		want string
	}{
		{"no bus", worker.Config{Registry: builtin.Registry()}, "needs a bus"},
		{"no registry", worker.Config{Bus: b}, "needs a bus and a registry"},
		{"negative concurrency", worker.Config{Bus: b, Registry: builtin.Registry(), Concurrency: -1}, "concurrency"},
		{"bad name", worker.Config{Bus: b, Registry: builtin.Registry(), Name: "a.b"}, "name"},
		{"bad pool", worker.Config{Bus: b, Registry: builtin.Registry(), Name: "w", Pools: []string{"a b"}}, "pool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := worker.New(tt.cfg)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func setupBus(t *testing.T) (*bus.Server, *bus.Bus) {
	tb := setup(t, bus.Config{})
	return tb.srv, tb.bus
}

func TestExecutesTaskAndPublishesOutcome(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	w := tb.start(t, worker.Config{Name: "w-exec"})
	dir := t.TempDir()
	path := filepath.Join(dir, "app.conf")
	task := tb.task(3, schemas.Resource{Type: "file", Name: path,
		Properties: map[string]any{"content": "port={{ lookup('data.port') }}\n"}})
	task.Data = map[string]any{"port": 8080}
	tb.publish(t, task)

	o := tb.next(t)
	require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	require.True(t, o.Changed)
	require.Equal(t, tb.runID, o.RunID)
	require.Equal(t, 3, o.Task)
	require.Equal(t, 1, o.Attempt)
	require.Equal(t, "file#"+path, o.Ref)
	require.Equal(t, w.Name(), o.Worker)
	require.Equal(t, 1, o.Delivery)
	require.False(t, o.Replayed)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "port=8080\n", string(data))

	// The same resource again is stable: the engine is idempotent.
	task.Task, task.Attempt = 4, 1
	tb.publish(t, task)
	o = tb.next(t)
	require.Equal(t, bus.TaskStable, o.Status, "%+v", o)
}

func TestNoopTaskChangesNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{})
	path := filepath.Join(t.TempDir(), "f")
	task := tb.task(0, schemas.Resource{Type: "file", Name: path, Properties: map[string]any{"content": "x"}})
	task.Noop = true
	tb.publish(t, task)
	o := tb.next(t)
	require.Equal(t, bus.TaskChanged, o.Status)
	require.Contains(t, o.Message, "would")
	require.False(t, exists(path))
}

func TestBadResourceFails(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{})
	tb.publish(t, tb.task(0, schemas.Resource{Type: "nosuchtype", Name: "x"}))
	tb.publish(t, tb.task(1, schemas.Resource{Type: "file", Name: "/tmp/x",
		Properties: map[string]any{"content": "{{ lookup('data.missing') }}"}}))
	got := map[int]bus.Outcome{}
	for range 2 {
		o := tb.next(t)
		got[o.Task] = o
	}
	require.Equal(t, bus.TaskFailed, got[0].Status)
	require.Contains(t, got[0].Error, "nosuchtype")
	require.Equal(t, bus.TaskFailed, got[1].Status)
	require.Contains(t, got[1].Error, "data.missing")
}

// TestRedeliveredFinishedTaskIsAnsweredFromItsRecord: a task message that
// comes back after the task was executed (its ack was lost) is answered
// from the results bucket and not executed again.
func TestRedeliveredFinishedTaskIsAnsweredFromItsRecord(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{TaskAckWait: 500 * time.Millisecond})
	dir := t.TempDir()
	task := tb.task(0, shell("append", dir, "echo ran >> log"))
	tb.publish(t, task)

	// Hold the first delivery without acking, as a worker that dies would.
	held, err := tb.bus.TaskConsumer(t.Context(), bus.DefaultPool)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), waitDeadline)
	defer cancel()
	first, err := held.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, first.Attempt)

	// Another copy of the same task attempt reaches the worker and is
	// executed and recorded.
	tb.start(t, worker.Config{Concurrency: 1})
	task.V = bus.Version
	tb.publishRaw(t, bus.DefaultPool, mustJSON(t, task))
	o := tb.next(t)
	require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	require.False(t, o.Replayed)

	// The held message is redelivered after AckWait: answered, not run.
	o = tb.next(t)
	require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	require.True(t, o.Replayed)
	// 2, or more if it came back while the copy still ran (then it is
	// left for the next redelivery, see TestRedeliveryWhileRunningRunsOnce).
	require.GreaterOrEqual(t, o.Delivery, 2)
	require.Equal(t, 0, o.Task)
	require.Equal(t, 1, o.Attempt)
	require.Equal(t, []string{"ran"}, lines(t, filepath.Join(dir, "log")))
}

// TestRedeliveryWhileRunningRunsOnce: a second delivery of a task attempt
// that reaches the worker while the first still runs there is not run; once
// the first has finished, the second is answered from the record.
func TestRedeliveryWhileRunningRunsOnce(t *testing.T) {
	t.Parallel()
	// The copy comes back every AckWait while the first still runs: on a
	// loaded machine (the sleep and the shell taking seconds) more than
	// the default 5 deliveries, after which it would never be answered.
	tb := setup(t, bus.Config{TaskAckWait: 300 * time.Millisecond, TaskMaxDeliver: 1000})
	tb.start(t, worker.Config{Concurrency: 2})
	dir := t.TempDir()
	task := tb.task(0, shell("slow", dir, "echo start >> log; touch started; sleep 0.8; echo end >> log"))
	tb.publish(t, task)
	eventually(t, "the task to start", func() bool { return exists(filepath.Join(dir, "started")) })
	task.V = bus.Version
	tb.publishRaw(t, bus.DefaultPool, mustJSON(t, task))

	o := tb.next(t)
	require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	require.False(t, o.Replayed, "%+v", o)
	o = tb.next(t)
	require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	require.True(t, o.Replayed, "the second delivery ran again: %+v", o)
	require.Equal(t, []string{"start", "end"}, lines(t, filepath.Join(dir, "log")))
}

// TestLongTaskIsNotRedelivered: a task running longer than AckWait sends
// in-progress acks, so it is delivered once and executed once.
func TestLongTaskIsNotRedelivered(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{TaskAckWait: 300 * time.Millisecond})
	tb.start(t, worker.Config{Concurrency: 2})
	dir := t.TempDir()
	tb.publish(t, tb.task(0, shell("long", dir, "echo start >> log; sleep 1; echo end >> log")))

	o := tb.next(t)
	require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	require.Equal(t, 1, o.Delivery)
	require.GreaterOrEqual(t, o.DurationMS, int64(1000))
	// A redelivery at 300ms would have started a second execution that
	// ends about 300ms after the first.
	tb.none(t, time.Second)
	require.Equal(t, []string{"start", "end"}, lines(t, filepath.Join(dir, "log")))
}

// TestConcurrencyIsBounded: with Concurrency 1 two tasks never run at once.
// Each takes a lock directory that the other would fail to create.
func TestConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{Concurrency: 1})
	dir := t.TempDir()
	line := func(n int) string {
		return "mkdir lock || exit 7; echo " + strconv.Itoa(n) + " >> log; sleep 0.3; rmdir lock"
	}
	for n := range 3 {
		tb.publish(t, tb.task(n, shell("t"+strconv.Itoa(n), dir, line(n))))
	}
	for range 3 {
		o := tb.next(t)
		require.Equal(t, bus.TaskChanged, o.Status, "tasks overlapped: %+v", o)
	}
	require.Len(t, lines(t, filepath.Join(dir, "log")), 3)
}

// TestMalformedTaskIsTerminated: an unreadable task message is terminated
// (never redelivered) and does not hold the worker's only slot.
func TestMalformedTaskIsTerminated(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{TaskAckWait: 300 * time.Millisecond})
	w := tb.start(t, worker.Config{Concurrency: 1})
	dir := t.TempDir()
	tb.publishRaw(t, bus.DefaultPool, []byte("this is not json"))
	tb.publishRaw(t, bus.DefaultPool, []byte(`{"v": 99, "run_id": "x"}`))
	tb.publish(t, tb.task(0, shell("ok", dir, "touch ok")))

	o := tb.next(t)
	require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	require.True(t, exists(filepath.Join(dir, "ok")))

	// Nothing is left for redelivery: past AckWait the queue is empty.
	within(t, "Stop", w.Stop)
	c, err := tb.bus.TaskConsumer(t.Context(), bus.DefaultPool)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	d, err := c.Next(ctx)
	if err == nil {
		t.Fatalf("a task message was left for redelivery: %q", d.Data())
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestStopDrainsRunningTask: Stop waits for the running task, whose outcome
// is published, and deregisters the worker.
func TestStopDrainsRunningTask(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	w := tb.start(t, worker.Config{Name: "draining"})
	dir := t.TempDir()
	e, err := tb.bus.Workers().Get(t.Context(), "draining")
	require.NoError(t, err)
	require.Contains(t, string(e.Value), `"pools":["default"]`)

	tb.publish(t, tb.task(0, shell("drain", dir, "touch started; sleep 0.5; touch done")))
	eventually(t, "the task to start", func() bool { return exists(filepath.Join(dir, "started")) })
	within(t, "Stop", w.Stop)
	require.True(t, exists(filepath.Join(dir, "done")), "Stop returned before the running task finished")
	o := tb.next(t)
	require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	_, err = tb.bus.Workers().Get(t.Context(), "draining")
	require.ErrorIs(t, err, bus.ErrNotFound)
	within(t, "Stop again", w.Stop) // idempotent
	within(t, "Kill after Stop", w.Kill)
}

// TestKillCancelsRunningTask: Kill kills the running command's processes.
func TestKillCancelsRunningTask(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	w := tb.start(t, worker.Config{})
	dir := t.TempDir()
	tb.publish(t, tb.task(0, shell("killed", dir, "sleep 30 & echo $! > sleep.pid; wait; touch done")))
	pidFile := filepath.Join(dir, "sleep.pid")
	eventually(t, "the task to start", func() bool {
		data, err := os.ReadFile(pidFile)
		return err == nil && strings.HasSuffix(string(data), "\n")
	})
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)

	within(t, "Kill", w.Kill)
	eventually(t, "the command's child to be killed", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
	require.False(t, exists(filepath.Join(dir, "done")))

	// The outcome, if one was published, says failed.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if d, err := tb.outcomes.Next(ctx); err == nil {
		var o bus.Outcome
		require.NoError(t, bus.Decode(d.Data(), &o))
		require.Equal(t, bus.TaskFailed, o.Status, "%+v", o)
	}
}

func TestTaskPastDeadlineFailsWithoutRunning(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{})
	dir := t.TempDir()
	task := tb.task(0, shell("late", dir, "touch ran"))
	task.Deadline = time.Now().Add(-time.Second)
	tb.publish(t, task)
	o := tb.next(t)
	require.Equal(t, bus.TaskFailed, o.Status)
	require.Contains(t, o.Error, "deadline")
	require.False(t, exists(filepath.Join(dir, "ran")))
}

func TestTaskIsCancelledAtItsDeadline(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{})
	dir := t.TempDir()
	task := tb.task(0, shell("slow", dir, "sleep 10; touch ran"))
	// Long enough that a loaded machine still hands the task over before
	// its deadline.
	task.TimeoutMS, task.Deadline = 1000, time.Now().Add(time.Second)
	tb.publish(t, task)
	o := tb.next(t)
	require.Equal(t, bus.TaskFailed, o.Status)
	require.Contains(t, o.Error, "timed out after 1s")
	require.Less(t, o.DurationMS, int64(5000))
	require.False(t, exists(filepath.Join(dir, "ran")))
}

func TestControlGuards(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{})
	dir := t.TempDir()
	tests := []struct {
		control *schemas.Control
		want    bus.TaskStatus
		message string
	}{
		{&schemas.Control{If: "false"}, bus.TaskSkipped, "control if is false"},
		{&schemas.Control{If: "lookup('data.x') == 1"}, bus.TaskChanged, ""},
		{&schemas.Control{Unless: "{{ lookup('data.x') == 1 }}"}, bus.TaskSkipped, "control unless is true"},
		{&schemas.Control{Unless: "lookup('data.x') == 2"}, bus.TaskChanged, ""},
		{&schemas.Control{If: "true", Unless: "true"}, bus.TaskSkipped, "control unless is true"},
		{&schemas.Control{If: "'yes'"}, bus.TaskFailed, "want a bool"},
	}
	for n, tt := range tests {
		res := shell("guarded"+strconv.Itoa(n), dir, "touch ran"+strconv.Itoa(n))
		res.Control = tt.control
		task := tb.task(n, res)
		task.Data = map[string]any{"x": 1}
		tb.publish(t, task)
	}
	got := map[int]bus.Outcome{}
	for range tests {
		o := tb.next(t)
		got[o.Task] = o
	}
	for n, tt := range tests {
		o := got[n]
		require.Equal(t, tt.want, o.Status, "case %d %+v: %+v", n, tt.control, o)
		require.Contains(t, o.Message+o.Error, tt.message, "case %d", n)
		require.Equal(t, tt.want == bus.TaskChanged, exists(filepath.Join(dir, "ran"+strconv.Itoa(n))), "case %d", n)
	}
}

func TestWorkerTakesOnlyItsPools(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{Pools: []string{"edge", "core"}, Concurrency: 1})
	dir := t.TempDir()
	for n, pool := range []string{"other", "edge", "core"} {
		task := tb.task(n, shell(pool, dir, "touch "+pool))
		task.Pool = pool
		tb.publish(t, task)
	}
	got := map[int]bool{}
	for range 2 {
		got[tb.next(t).Task] = true
	}
	require.Equal(t, map[int]bool{1: true, 2: true}, got)
	require.False(t, exists(filepath.Join(dir, "other")))
}

// Facts are gathered again on their interval, never per task: the workers
// bucket and the templates of later tasks see the new ones.
func TestFactsRefreshedOnTheirInterval(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	var gathered atomic.Int32
	tb.start(t, worker.Config{Name: "w-facts", Facts: map[string]any{"gen": 0},
		FactsInterval: 50 * time.Millisecond,
		GatherFacts: func(context.Context) (map[string]any, error) {
			return map[string]any{"gen": int(gathered.Add(1))}, nil
		}})
	data, err := tb.bus.Workers().WaitFor(t.Context(), "w-facts", func(v []byte) bool {
		var reg worker.Registration
		return json.Unmarshal(v, &reg) == nil && reg.Facts["gen"] != nil && reg.Facts["gen"].(float64) >= 2
	})
	require.NoError(t, err, "the registration never showed refreshed facts")
	require.Contains(t, string(data), `"gen"`)

	path := filepath.Join(t.TempDir(), "gen")
	tb.publish(t, tb.task(1, schemas.Resource{Type: "file", Name: path,
		Properties: map[string]any{"content": "gen={{ lookup('facts.gen') }}"}}))
	o := tb.next(t)
	require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotEqual(t, "gen=0", string(got), "the task rendered the facts of the start")
	require.Contains(t, string(got), "gen=")
}

// TestOnlyOutcomesThatMustNotRepeatAreRecorded: a changed or failed
// outcome is recorded for redeliveries; a stable one, and any in noop
// mode, is not (a redelivery checks it again, changing nothing).
func TestOnlyOutcomesThatMustNotRepeatAreRecorded(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{})
	path := filepath.Join(t.TempDir(), "f")
	file := schemas.Resource{Type: "file", Name: path, Properties: map[string]any{"content": "x"}}
	noop := tb.task(0, file)
	noop.Noop = true
	changed := tb.task(1, file)
	stable := tb.task(2, file)
	failed := tb.task(3, schemas.Resource{Type: "exec", Name: "false", Properties: map[string]any{"command": "/bin/false"}})
	want := map[int]bus.TaskStatus{0: bus.TaskChanged, 1: bus.TaskChanged, 2: bus.TaskStable, 3: bus.TaskFailed}
	for _, task := range []bus.Task{noop, changed, stable, failed} {
		tb.publish(t, task) // one at a time: the file changes on the second
		o := tb.next(t)
		require.Equal(t, want[o.Task], o.Status, "%+v", o)
	}
	// A task is acked once its record is stored: with the work queue
	// empty, every record that will be there is.
	js, err := jetstream.New(tb.bus.Conn())
	require.NoError(t, err)
	eventually(t, "every task acked", func() bool {
		st, err := js.Stream(t.Context(), bus.StreamTasks)
		return err == nil && st.CachedInfo().State.Msgs == 0
	})
	for task, recorded := range map[int]bool{0: false, 1: true, 2: false, 3: true} {
		_, err := tb.bus.Results().Get(t.Context(), tb.runID+"."+strconv.Itoa(task)+".1")
		if recorded {
			require.NoError(t, err, "task %d", task)
		} else {
			require.ErrorIs(t, err, bus.ErrNotFound, "task %d", task)
		}
	}
}

// TestResourceLogLinesCarryTheirAttributes: a resource's log lines name
// the run, the resource, the manifest, the attempt and the delivery, and
// then their own attributes.
func TestResourceLogLinesCarryTheirAttributes(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	tb.start(t, worker.Config{Logger: logger})
	task := tb.task(0, schemas.Resource{Type: "exec", Name: "false", Properties: map[string]any{"command": "/bin/false"}})
	tb.publish(t, task)
	require.Equal(t, bus.TaskFailed, tb.next(t).Status)
	eventually(t, "the task's log line", func() bool { return strings.Contains(buf.String(), `"msg":"task failed"`) })
	for line := range strings.SplitSeq(buf.String(), "\n") {
		if !strings.Contains(line, `"msg":"task failed"`) {
			continue
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		require.Equal(t, tb.runID, rec["run_id"], line)
		require.Equal(t, "exec#false", rec["resource"], line)
		require.EqualValues(t, 1, rec["attempt"], line)
		require.EqualValues(t, 1, rec["delivery"], line)
		require.Equal(t, "worker", rec["component"], line)
		require.Contains(t, rec, "error", line)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSegmentGoesOnPastAFailure: a segment marked continue_after_failure
// goes on past a failed resource, ends before one that requires a failed
// resource of the segment, and ends after a failure with retries left;
// unmarked, it ends at the first failure.
func TestSegmentGoesOnPastAFailure(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{Concurrency: 1}) // tasks one after another, in order
	dir := t.TempDir()
	fails := schemas.Resource{Type: "exec", Name: "false", Properties: map[string]any{"command": "/bin/false"}}
	retried := fails
	retried.Retry = 1
	renumber := func(task bus.Task, first int) bus.Task {
		task.Task = first
		for i := range task.Segment {
			task.Segment[i].Task = first + i + 1
		}
		return task
	}

	marked := tb.segment(fails, shell("a", dir, "echo a >> log"), shell("b", dir, "echo b >> log"), shell("c", dir, "echo c >> log"))
	marked.ContinueAfterFailure = true
	marked.Segment[1].Requires = []int{0} // b requires the failed resource
	retry := renumber(tb.segment(retried, shell("d", dir, "echo d >> log")), 10)
	retry.ContinueAfterFailure = true
	unmarked := renumber(tb.segment(fails, shell("e", dir, "echo e >> log")), 20)
	sentinel := tb.task(30, shell("f", dir, "echo f >> log"))
	for _, task := range []bus.Task{marked, retry, unmarked, sentinel} {
		tb.publish(t, task)
	}
	var got []string
	for range 5 {
		o := tb.next(t)
		got = append(got, fmt.Sprintf("%d:%s", o.Task, o.Status))
	}
	require.Equal(t, []string{"0:failed", "1:changed", "10:failed", "20:failed", "30:changed"}, got)
	require.Equal(t, []string{"a", "f"}, lines(t, filepath.Join(dir, "log")))
}

package worker_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/resources/ids"
	"github.com/manifold-run/manifold/schemas"
	"github.com/manifold-run/manifold/worker"
)

// convergedFiles writes n files in dir and returns their resources, owned
// by root:root, each converged.
func convergedFiles(t testing.TB, dir string, n int) []schemas.Resource {
	t.Helper()
	rs := make([]schemas.Resource, 0, n)
	for i := range n {
		p := filepath.Join(dir, "f"+strconv.Itoa(i))
		content := "content " + strconv.Itoa(i) + "\n"
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		require.NoError(t, os.Chmod(p, 0o644))
		rs = append(rs, schemas.Resource{Type: "file", Name: p, Properties: map[string]any{
			"content": content, "owner": "root", "group": "root", "mode": "0644"}})
	}
	return rs
}

// TestConvergedSegmentStatsAccountsOnce: the checks of a segment's files
// look at /etc/passwd and /etc/group once for the whole batch (one
// ids.Snapshot), not once per file; a second segment looks again, so a
// user added between runs is seen. Not parallel: the counter is the
// process's.
func TestConvergedSegmentStatsAccountsOnce(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("owner root on the test's files needs root")
	}
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{})
	const n = 40
	rs := convergedFiles(t, t.TempDir(), n)
	for attempt := 1; attempt <= 2; attempt++ {
		task := tb.segment(rs...)
		task.Attempt = attempt
		for i := range task.Segment {
			task.Segment[i].Attempt = attempt
		}
		before := ids.Stats()
		tb.publish(t, task)
		for i := range rs {
			o := tb.next(t)
			require.Equal(t, i, o.Task, "%+v", o)
			require.Equal(t, bus.TaskStable, o.Status, "%+v", o)
		}
		// One stat of each database for the segment; 2n before.
		require.Equal(t, int64(2), ids.Stats()-before, "stats of the account databases for a segment of %d files", n)
	}
}

// TestNoopSegmentStatsAccountsOnce: in noop nothing is applied, so the
// snapshot covers the whole batch loop, the drifted files' reports
// included.
func TestNoopSegmentStatsAccountsOnce(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("owner root on the test's files needs root")
	}
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{})
	const n = 10
	rs := convergedFiles(t, t.TempDir(), n)
	for i := range 3 {
		require.NoError(t, os.WriteFile(rs[i].Name, []byte("edited\n"), 0o644))
	}
	task := tb.segment(rs...)
	task.Noop = true
	before := ids.Stats()
	tb.publish(t, task)
	for i := range rs {
		o := tb.next(t)
		want := bus.TaskStable
		if i < 3 {
			want = bus.TaskChanged
		}
		require.Equal(t, want, o.Status, "%+v", o)
	}
	require.Equal(t, int64(2), ids.Stats()-before)
	b, err := os.ReadFile(rs[0].Name)
	require.NoError(t, err)
	require.Equal(t, "edited\n", string(b), "noop changed a file")
}

// BenchmarkConvergedSegment measures a worker answering segments of 256
// converged files (owner, group, mode and content managed) through a real
// embedded JetStream: CPU time (user+system of the whole process, the
// server and the outcome reader included) and allocations per file.
//
//	go test ./worker -run '^$' -bench ConvergedSegment -benchtime 20x
func BenchmarkConvergedSegment(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("owner root on the files needs root")
	}
	const n = 256
	_, bs := bustest.Start(b, bus.Config{})
	runID := "run-bench"
	// A core subscription reads the outcomes as they are published (a
	// pull per outcome would cost more than the worker).
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
	attempt := 0
	for b.Loop() {
		attempt++
		task := bus.Task{RunID: runID, RootRunID: runID, Task: 0, Attempt: attempt, Manifest: "m.yaml", Resource: rs[0],
			Data: map[string]any{"greeting": "hello"}, Pool: bus.DefaultPool, TimeoutMS: 30_000, Deadline: time.Now().Add(time.Minute)}
		for i, r := range rs[1:] {
			task.Segment = append(task.Segment, bus.SegmentItem{Task: i + 1, Attempt: attempt, Resource: r, TimeoutMS: 30_000})
		}
		c0 := cpuTime()
		require.NoError(b, bs.PublishTask(b.Context(), task))
		for range n {
			select {
			case m := <-got:
				var o bus.Outcome
				require.NoError(b, bus.Decode(m.Data, &o))
				require.Equal(b, bus.TaskStable, o.Status, "%+v", o)
			case <-time.After(waitDeadline):
				b.Fatal("no outcome in time")
			}
		}
		cpu += cpuTime() - c0
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/n, "cpu-µs/file")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countingHandler counts WithAttrs calls and keeps the records it handles
// with their attributes.
type countingHandler struct {
	level   slog.Level
	attrs   []slog.Attr
	withs   *atomic.Int64
	records *recordLog
}

type recordLog struct {
	mu   sync.Mutex
	recs []map[string]string
}

func (h countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message}
	for _, a := range h.attrs {
		m[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	h.records.mu.Lock()
	h.records.recs = append(h.records.recs, m)
	h.records.mu.Unlock()
	return nil
}
func (h countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.withs.Add(1)
	h.attrs = append(slices.Clone(h.attrs), as...)
	return h
}
func (h countingHandler) WithGroup(string) slog.Handler { return h }

// TestItemLoggerFormatsOnlyWhatLogs: the logger of each resource of a
// segment adds its attributes (run, resource, attempt, delivery, trace and
// span IDs) to the handler only when the resource logs something at the
// handler's level: a stable file logs nothing at warn, so a converged
// segment adds none (it added two sets per resource), while a failed one
// logs with all of them.
func TestItemLoggerFormatsOnlyWhatLogs(t *testing.T) {
	t.Parallel()
	withs, recs := &atomic.Int64{}, &recordLog{}
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{Logger: slog.New(countingHandler{level: slog.LevelWarn, withs: withs, records: recs})})
	dir := t.TempDir()
	rs := convergedFiles(t, dir, 20)
	for i := range rs {
		delete(rs[i].Properties, "owner")
		delete(rs[i].Properties, "group")
	}
	// The last one fails: its parent directory does not exist.
	rs = append(rs, schemas.Resource{Type: "file", Name: filepath.Join(dir, "missing", "f"), Properties: map[string]any{"content": "x\n"}})
	task := tb.segment(rs...)
	task.ContinueAfterFailure = true
	start := withs.Load()
	tb.publish(t, task)
	for i := range rs {
		o := tb.next(t)
		want := bus.TaskStable
		if i == len(rs)-1 {
			want = bus.TaskFailed
		}
		require.Equal(t, want, o.Status, "%+v", o)
	}
	// The task's own logger (run_id, manifest, delivery) and the failed
	// resource's (its attributes, then its span's) are made; the 20 stable
	// resources' never are.
	require.LessOrEqual(t, withs.Load()-start, int64(3), "WithAttrs calls for a segment of 21 resources")
	var failed map[string]string
	eventually(t, "the failed resource's log line", func() bool {
		recs.mu.Lock()
		defer recs.mu.Unlock()
		for _, r := range recs.recs {
			if r["msg"] == "task failed" {
				failed = r
				return true
			}
		}
		return false
	})
	require.Equal(t, tb.runID, failed["run_id"])
	require.Equal(t, "file#"+filepath.Join(dir, "missing", "f"), failed["resource"])
	require.Equal(t, "1", failed["attempt"])
	require.Equal(t, "1", failed["delivery"])
	require.Len(t, failed["trace_id"], 32, "%v", failed)
	require.Len(t, failed["span_id"], 16, "%v", failed)
}

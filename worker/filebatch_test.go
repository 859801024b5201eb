package worker_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/schemas"
	"github.com/manifold-run/manifold/worker"
)

// TestSegmentFilesShareOneCommit: the files of a segment that need writing
// are written as one batch (one "execute batch" span holding "apply
// batch", linked to each file's own execute span, which keeps its check
// and re-check), each answered by its own outcome in order; a directory
// is executed alone in its place so the file after it, in it, converges.
// The same segment again is stable and has no batch span at all.
func TestSegmentFilesShareOneCommit(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))})
	dir := t.TempDir()
	var rs []schemas.Resource
	for i := range 4 {
		rs = append(rs, schemas.Resource{Type: "file", Name: filepath.Join(dir, "f"+strconv.Itoa(i)),
			Properties: map[string]any{"content": "content " + strconv.Itoa(i) + "\n"}})
	}
	rs = append(rs,
		schemas.Resource{Type: "file", Name: filepath.Join(dir, "sub"), Ensure: "directory"},
		schemas.Resource{Type: "file", Name: filepath.Join(dir, "sub", "g"), Properties: map[string]any{"content": "g\n"}})

	run := func(attempt int, want bus.TaskStatus) (batches []tracetest.SpanStub) {
		spans.Reset()
		task := tb.segment(rs...)
		task.Attempt = attempt // another message, not a duplicate
		for i := range task.Segment {
			task.Segment[i].Attempt = attempt
		}
		tb.publish(t, task)
		for i, r := range rs {
			o := tb.next(t)
			require.Equal(t, i, o.Task, "%+v", o)
			require.Equal(t, "file#"+r.Name, o.Ref)
			require.Equal(t, want, o.Status, "%+v", o)
		}
		for i := range 4 {
			b, err := os.ReadFile(filepath.Join(dir, "f"+strconv.Itoa(i)))
			require.NoError(t, err)
			require.Equal(t, "content "+strconv.Itoa(i)+"\n", string(b))
		}
		b, err := os.ReadFile(filepath.Join(dir, "sub", "g"))
		require.NoError(t, err)
		require.Equal(t, "g\n", string(b))
		// Every span of the segment is ended once its outcome is out.
		execs := 0
		for _, s := range spans.GetSpans() {
			switch {
			case s.Name == "execute batch":
				batches = append(batches, s)
			case strings.HasPrefix(s.Name, "execute file#"):
				execs++
			}
		}
		require.Equal(t, len(rs), execs, "one execute span per resource")
		return batches
	}

	batches := run(1, bus.TaskChanged)
	require.Len(t, batches, 1, "the four files written as one batch")
	require.Len(t, batches[0].Links, 4)
	var under []string
	for _, s := range spans.GetSpans() {
		if s.Parent.SpanID() == batches[0].SpanContext.SpanID() {
			under = append(under, s.Name)
		}
	}
	require.Equal(t, []string{"apply batch"}, under)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 5, "no temporary file left: %v", entries)

	require.Empty(t, run(2, bus.TaskStable), "a converged segment has no batch span")
}

// TestNoopSegmentOfFilesRunsInTheBatchLoop: a noop segment of files is
// executed in the batch loop (each resource's span carries the batch key)
// so it costs what a converged segment does, and still changes nothing:
// every file is reported as it would change and stays as it was.
func TestNoopSegmentOfFilesRunsInTheBatchLoop(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))})
	dir := t.TempDir()
	var rs []schemas.Resource
	for i := range 3 {
		p := filepath.Join(dir, "f"+strconv.Itoa(i))
		require.NoError(t, os.WriteFile(p, []byte("old\n"), 0o644))
		rs = append(rs, schemas.Resource{Type: "file", Name: p, Properties: map[string]any{"content": "new\n"}})
	}
	task := tb.segment(rs...)
	task.Noop = true
	tb.publish(t, task)
	for i := range rs {
		o := tb.next(t)
		require.Equal(t, i, o.Task, "%+v", o)
		require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
		require.Contains(t, o.Message, "would update content")
	}
	for i := range rs {
		b, err := os.ReadFile(filepath.Join(dir, "f"+strconv.Itoa(i)))
		require.NoError(t, err)
		require.Equal(t, "old\n", string(b), "noop changed a file")
	}
	keyed := 0
	for _, s := range spans.GetSpans() {
		require.NotEqual(t, "execute batch", s.Name, "noop applies nothing")
		if strings.HasPrefix(s.Name, "execute file#") {
			for _, a := range s.Attributes {
				if a.Key == "manifold.batch.key" && a.Value.AsString() == "file" {
					keyed++
				}
			}
		}
	}
	require.Equal(t, len(rs), keyed, "every noop file checked in the batch loop")
}

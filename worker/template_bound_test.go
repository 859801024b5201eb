package worker_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/schemas"
	"github.com/manifold-run/manifold/worker"
)

// A recursive Jet template overflowed the worker's stack (a fatal error
// no recover catches, so the task was redelivered to the next worker,
// which died too). A Jet file read by jet() and a scaffold template, in
// both engines, now fail their task with the bound's error, and the
// worker goes on to the next task.
func TestRecursiveTemplatesFailTheTaskNotTheWorker(t *testing.T) {
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{})
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write("r.jet", "[[ block r() ]][[ yield r() ]][[ end ]]")
	write("jet/a.conf", "[[ block r() ]][[ yield r() ]][[ end ]]")
	write("go/a.conf", `{{ define "r" }}{{ template "r" }}{{ end }}{{ template "r" }}`)

	cases := []struct {
		name string
		res  schemas.Resource
		want string
	}{
		{"jet file", schemas.Resource{Type: "file", Name: filepath.Join(dir, "out"),
			Properties: map[string]any{"content": "{{ jet('r.jet') }}"}}, "nested more than 1000 deep"},
		{"scaffold jet", schemas.Resource{Type: "scaffold", Name: filepath.Join(dir, "t1"),
			Properties: map[string]any{"source": "jet"}}, "nested more than 1000 deep"},
		{"scaffold go", schemas.Resource{Type: "scaffold", Name: filepath.Join(dir, "t2"),
			Properties: map[string]any{"source": "go", "engine": "go"}}, "nested more than 1000 deep"},
	}
	for i, c := range cases {
		task := tb.task(i, c.res)
		task.WorkDir = dir
		start := time.Now()
		tb.publish(t, task)
		o := tb.next(t)
		require.Equal(t, bus.TaskFailed, o.Status, "%s: %+v", c.name, o)
		require.Equal(t, i, o.Task, c.name)
		require.Contains(t, o.Error, c.want, c.name)
		require.Less(t, time.Since(start), 15*time.Second, c.name)
	}
	require.NoFileExists(t, filepath.Join(dir, "out"))
	require.NoDirExists(t, filepath.Join(dir, "t1"))

	// The worker survived them all: it executes the next task.
	tb.publish(t, tb.task(len(cases), shell("after", dir, "touch after")))
	o := tb.next(t)
	require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	require.FileExists(t, filepath.Join(dir, "after"))
}

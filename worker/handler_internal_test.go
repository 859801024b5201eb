package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/schemas"
)

// TestHandlersAreReused: tasks that come one after another are handled
// by a goroutine that handled one before (its stack already grown), not
// by a goroutine each; Stop ends them (goleak checks the package).
func TestHandlersAreReused(t *testing.T) {
	t.Parallel()
	_, b := bustest.Start(t, bus.Config{})
	w, err := New(Config{Bus: b, Registry: builtin.Registry(), Name: "w1", Concurrency: 2, DisableAssignments: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, w.Start(ctx))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			w.Kill()
		}
	})
	const run = "run-handlers"
	outcomes, err := b.OutcomeConsumer(ctx, run)
	require.NoError(t, err)
	for i := range 10 {
		res := schemas.Resource{Type: "exec", Name: fmt.Sprintf("e%d", i), Properties: map[string]any{"command": "/bin/true"}}
		require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: run, RootRunID: run, Task: i, Attempt: 1, Manifest: "m.yaml",
			Resource: res, Pool: bus.DefaultPool, TimeoutMS: 30_000, Deadline: time.Now().Add(time.Minute)}))
		d, err := outcomes.Next(ctx)
		require.NoError(t, err)
		var o bus.Outcome
		require.NoError(t, bus.Decode(d.Data(), &o))
		require.Equal(t, i, o.Task)
		require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
		require.NoError(t, d.Ack(ctx))
	}
	// (two slots, and a handler may still be ending its task's last steps
	// when the next task arrives; a goroutine each would be 10)
	require.LessOrEqual(t, w.handlersStarted.Load(), int64(3), "10 tasks one after another")
	w.Stop()
	stopped = true
}

// TestHandlerCacheIsPerRun: the single tasks of one run handled one after
// another share one directory cache and environment, up to
// maxHandlerCacheTasks; a task of another run, or the limit, starts a new
// one (the old one closed).
func TestHandlerCacheIsPerRun(t *testing.T) {
	t.Parallel()
	var c handlerCache
	defer c.close()
	first, env := c.forTask("r1")
	require.NotNil(t, first)
	require.NotEmpty(t, env)
	for range maxHandlerCacheTasks - 1 {
		d, _ := c.forTask("r1")
		require.Same(t, first, d, "a task of the same run")
	}
	d, _ := c.forTask("r1")
	require.NotSame(t, first, d, "past maxHandlerCacheTasks")
	other, _ := c.forTask("r2")
	require.NotSame(t, d, other, "a task of another run")
	c.close()
	require.Nil(t, c.dirs)
}

package coordinator_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// These tests run the coordinator alone: the test takes the tasks from the
// pool's queue and publishes the outcomes itself.

// takeTask returns the next task of the default pool, acked.
func takeTask(t *testing.T, c *bus.Consumer) bus.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runDeadline)
	defer cancel()
	d, err := c.Next(ctx)
	require.NoError(t, err, "no task dispatched in time")
	var task bus.Task
	require.NoError(t, bus.Decode(d.Data(), &task))
	require.NoError(t, d.Ack(ctx))
	takenTokens.Store(task.MsgID(), task.Token)
	return task
}

// takenTokens are the tokens of the tasks takeTask took, by message ID:
// the test answers them as the worker they were delivered to would.
var takenTokens sync.Map

// outcome publishes an outcome of a task attempt, signed with its token
// when takeTask took it (unsigned otherwise: the coordinator refuses it).
func (tb *testBundle) outcome(t *testing.T, runID string, task, attempt int, status bus.TaskStatus) {
	t.Helper()
	o := bus.Outcome{RunID: runID, Task: task, Attempt: attempt,
		Status: status, Changed: status == bus.TaskChanged, Worker: "by-hand",
		Message: fmt.Sprintf("attempt %d %s", attempt, status)}
	if tok, ok := takenTokens.Load(bus.TaskMsgID(runID, task, attempt)); ok {
		bus.SignOutcome(&o, tok.(string))
	}
	require.NoError(t, tb.bus.PublishOutcome(t.Context(), o))
}

func TestStaleOutcomesAreDropped(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	tasks, err := tb.bus.TaskConsumer(t.Context(), bus.DefaultPool)
	require.NoError(t, err)
	runID := tb.submit(t, `
resources:
  - {type: exec, name: a, command: /bin/true, retry: 1}
  - {type: exec, name: b, command: /bin/true, require: [exec#a]}
ordering: graph
`)

	a := takeTask(t, tasks)
	require.Equal(t, 0, a.Task)
	require.Equal(t, 1, a.Attempt)
	require.Equal(t, runID, a.RunID)
	require.Equal(t, bus.TaskMsgID(runID, 0, 1), a.MsgID())

	// b has not been dispatched: no outcome of it can be current.
	tb.outcome(t, runID, 1, 0, bus.TaskChanged)
	tb.outcome(t, runID, 1, 1, bus.TaskChanged)
	// An attempt of a that was never dispatched.
	tb.outcome(t, runID, 0, 2, bus.TaskChanged)
	// Another run's outcome on this run's subject, and an unknown task.
	require.NoError(t, tb.bus.PublishOutcome(t.Context(), bus.Outcome{RunID: "other", Task: 0, Attempt: 1, Status: bus.TaskChanged}))
	tb.outcome(t, runID, 7, 1, bus.TaskChanged)
	// The current attempt fails: a is retried.
	tb.outcome(t, runID, 0, 1, bus.TaskFailed)

	retry := takeTask(t, tasks)
	require.Equal(t, 0, retry.Task)
	require.Equal(t, 2, retry.Attempt)
	// A late outcome of the first attempt (a late ack that landed on
	// another worker's redelivery) is stale now.
	tb.outcome(t, runID, 0, 1, bus.TaskChanged)
	tb.outcome(t, runID, 0, 2, bus.TaskStable)
	// a is settled: a second outcome of its attempt is dropped.
	tb.outcome(t, runID, 0, 2, bus.TaskFailed)

	b := takeTask(t, tasks)
	require.Equal(t, 1, b.Task, "b was not dispatched: a stale outcome settled it")
	require.Equal(t, 1, b.Attempt)
	tb.outcome(t, runID, 1, 1, bus.TaskChanged)

	rep, events := tb.wait(t, runID)
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep.Resources)
	ra := resource(t, rep, "exec#a")
	require.Equal(t, "stable", ra.Status)
	require.Equal(t, "attempt 2 stable", ra.Message)
	require.Equal(t, 2, ra.Attempts)
	rb := resource(t, rep, "exec#b")
	require.Equal(t, "changed", rb.Status)
	require.Equal(t, "attempt 1 changed", rb.Message)
	require.Equal(t, "by-hand", rb.Worker)
	finished := map[string]int{}
	for _, ev := range events {
		if ev.Kind == bus.EventTaskFinished {
			finished[ev.Ref]++
		}
	}
	require.Equal(t, map[string]int{"exec#a": 1, "exec#b": 1}, finished)
}

// TestUnknownOutcomeStatusFailsTheTask: a worker answering with a status
// that is not an end state does not leave the run hanging.
func TestUnknownOutcomeStatusFailsTheTask(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	tasks, err := tb.bus.TaskConsumer(t.Context(), bus.DefaultPool)
	require.NoError(t, err)
	runID := tb.submit(t, "resources: [{type: exec, name: a, command: /bin/true}]\n")
	a := takeTask(t, tasks)
	tb.outcome(t, runID, a.Task, a.Attempt, bus.TaskStatus("running"))
	rep, _ := tb.wait(t, runID)
	require.Equal(t, coordinator.RunFailed, rep.Status)
	require.Contains(t, resource(t, rep, "exec#a").Error, `unknown status "running"`)
}

// TestTaskCarriesRunContext: what the coordinator puts in a task.
func TestTaskCarriesRunContext(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	tasks, err := tb.bus.TaskConsumer(t.Context(), bus.DefaultPool)
	require.NoError(t, err)
	runID := tb.submit(t, `
data: {port: 80, nested: {a: 1, b: 2}}
resources:
  - {type: exec, name: "run-{{ lookup('data.port') }}", command: "/bin/echo {{ lookup('data.nested.b') }}", timeout: 3s}
`, noop, func(r *bus.RunRequest) {
		r.Data = map[string]any{"nested": map[string]any{"b": 3}}
		r.WorkDir = "/srv/work"
	})
	task := takeTask(t, tasks)
	require.Equal(t, runID, task.RunID)
	require.Equal(t, runID, task.RootRunID)
	require.Equal(t, "run-80", task.Resource.Name)
	require.Equal(t, "/bin/echo {{ lookup('data.nested.b') }}", task.Resource.Properties["command"], "properties are rendered on the worker")
	require.Equal(t, map[string]any{"port": float64(80), "nested": map[string]any{"a": float64(1), "b": float64(3)}}, task.Data)
	require.True(t, task.Noop)
	require.Equal(t, "/srv/work", task.WorkDir)
	require.Equal(t, bus.DefaultPool, task.Pool)
	require.Equal(t, int64(3000), task.TimeoutMS)
	require.False(t, task.Deadline.IsZero())
	tb.outcome(t, runID, task.Task, task.Attempt, bus.TaskChanged)
	rep, _ := tb.wait(t, runID)
	require.Equal(t, coordinator.RunSucceeded, rep.Status)
	require.True(t, rep.Noop)
}

package worker_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/worker"
)

func TestRunCancellationKillsItsRunningTasks(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{Concurrency: 2})
	dir := t.TempDir()
	tb.publish(t, tb.task(0, shell("long", dir, "sleep 30 & echo $! > sleep.pid; wait; touch done")))
	pidFile := filepath.Join(dir, "sleep.pid")
	eventually(t, "the task to start", func() bool {
		data, err := os.ReadFile(pidFile)
		return err == nil && strings.HasSuffix(string(data), "\n")
	})
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)

	// Another run's cancellation touches nothing of this run.
	require.NoError(t, tb.bus.Conn().Publish(bus.CancelSubject("another-run"), nil))
	require.NoError(t, tb.bus.Conn().Publish(bus.CancelSubject(tb.runID), nil))

	o := tb.next(t)
	require.Equal(t, bus.TaskFailed, o.Status, "%+v", o)
	require.Contains(t, o.Error, "run cancelled")
	eventually(t, "the command's child to be killed", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
	require.False(t, exists(filepath.Join(dir, "done")))

	// A task of the cancelled run taken afterwards is dropped, unexecuted.
	tb.publish(t, tb.task(1, shell("after", dir, "touch after")))
	eventually(t, "the later task to leave the stream", func() bool { return backlog(t, tb.bus) == 0 })
	require.False(t, exists(filepath.Join(dir, "after")))
}

// TestKilledWorkerReleasesItsTaskToAnother: a worker killed while shutting
// down does not fail the task it interrupts; another worker of the pool
// runs it.
func TestKilledWorkerReleasesItsTaskToAnother(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	first := tb.start(t, worker.Config{Name: "first", Concurrency: 1})
	dir := t.TempDir()
	tb.publish(t, tb.task(0, shell("once", dir, "if [ -e started ]; then exit 0; fi; touch started; sleep 30")))
	eventually(t, "the task to start", func() bool { return exists(filepath.Join(dir, "started")) })
	first.Kill()

	tb.start(t, worker.Config{Name: "second", Concurrency: 1})
	o := tb.next(t)
	require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	require.Equal(t, "second", o.Worker)
	require.Equal(t, 2, o.Delivery)
}

// backlog is the number of task messages not yet acked, all pools.
func backlog(t *testing.T, b *bus.Bus) int {
	t.Helper()
	bls, err := b.Backlogs(t.Context())
	require.NoError(t, err)
	n := 0
	for _, bl := range bls {
		n += bl.Tasks
	}
	return n
}

// TestQueuedTasksOfACancelledRunAreDropped: both slots busy on long
// commands, ten commands of the run and one of a child run (same root)
// queued behind them; the run is cancelled (cancels bucket, then control
// subject, as a coordinator does): the running commands are killed and
// the worker takes every queued task off the stream without running it.
func TestQueuedTasksOfACancelledRunAreDropped(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{Concurrency: 2})
	dir := t.TempDir()
	tb.publish(t, tb.task(0, shell("long-a", dir, "touch started-a; sleep 30; touch done-a")))
	tb.publish(t, tb.task(1, shell("long-b", dir, "touch started-b; sleep 30; touch done-b")))
	for i := range 10 {
		tb.publish(t, tb.task(2+i, shell(fmt.Sprintf("queued-%d", i), dir, fmt.Sprintf("touch ran-%d", i))))
	}
	child := tb.task(0, shell("child", dir, "touch ran-child"))
	child.RunID = tb.runID + "-a12"
	tb.publish(t, child)
	eventually(t, "both long commands to start", func() bool {
		return exists(filepath.Join(dir, "started-a")) && exists(filepath.Join(dir, "started-b"))
	})
	require.Equal(t, 11, backlog(t, tb.bus)-2, "the short tasks are queued")

	require.NoError(t, tb.bus.MarkCancelled(t.Context(), tb.runID))
	require.NoError(t, tb.bus.Conn().Publish(bus.CancelSubject(tb.runID), nil))
	for range 2 {
		o := tb.next(t)
		require.Equal(t, bus.TaskFailed, o.Status, "%+v", o)
		require.Contains(t, o.Error, "run cancelled")
	}
	eventually(t, "the queued tasks to leave the stream", func() bool { return backlog(t, tb.bus) == 0 })
	ran, _ := filepath.Glob(filepath.Join(dir, "ran-*"))
	require.Empty(t, ran, "queued commands of the cancelled run ran")
	require.False(t, exists(filepath.Join(dir, "done-a")) || exists(filepath.Join(dir, "done-b")))
	tb.none(t, 100*time.Millisecond) // dropped tasks send no outcome
}

// TestCancelledRunIsDroppedByAWorkerThatMissedTheAnnouncement: a worker
// started after the cancellation was announced (it never heard the control
// subject) reads the cancels bucket: the run's tasks and its tree's are
// dropped, another run's task runs.
func TestCancelledRunIsDroppedByAWorkerThatMissedTheAnnouncement(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	dir := t.TempDir()
	require.NoError(t, tb.bus.MarkCancelled(t.Context(), tb.runID))
	tb.publish(t, tb.task(0, shell("mine", dir, "touch ran-mine")))
	child := tb.task(0, shell("child", dir, "touch ran-child"))
	child.RunID = tb.runID + "-a3"
	tb.publish(t, child)
	other := tb.task(0, shell("other", dir, "touch other"))
	other.RunID, other.RootRunID = "other-run", "other-run"
	tb.publish(t, other)

	tb.start(t, worker.Config{Concurrency: 1})
	eventually(t, "every task to leave the stream", func() bool { return backlog(t, tb.bus) == 0 })
	require.True(t, exists(filepath.Join(dir, "other")), "another run's task was not run")
	ran, _ := filepath.Glob(filepath.Join(dir, "ran-*"))
	require.Empty(t, ran, "tasks of the cancelled run tree ran")
}

package worker_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

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

	// The worker goes on taking tasks.
	tb.publish(t, tb.task(1, shell("after", dir, "touch after")))
	require.Equal(t, bus.TaskChanged, tb.next(t).Status)
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

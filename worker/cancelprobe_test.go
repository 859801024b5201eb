package worker_test

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/worker"
)

// TestCancellationsLookedUpOncePerRun: before running a task the worker
// looks its runs up in the cancellations bucket, once per run while its
// connection lasts: a cancellation written after that look-up is announced
// on the control subject, which the worker hears. A root run's task names
// its run twice (RunID and RootRunID) and is looked up once; a second task
// of the run is not looked up again (it was: a round trip to the server
// per task message on a chain's critical path); a child run's task looks
// up the child only. After a reconnection (announcements may have been
// missed) the runs are looked up again: a run cancelled meanwhile in the
// bucket alone is dropped.
func TestCancellationsLookedUpOncePerRun(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	var mu sync.Mutex
	gets := map[string]int{} // run ID → look-ups
	sub, err := tb.bus.Conn().Subscribe("$JS.API.DIRECT.GET.KV_"+bus.BucketCancels+".>", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		gets[m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]]++
	})
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, tb.bus.Conn().Flush())
	heard := func(want map[string]int) {
		t.Helper()
		// The look-ups were made before the commands ran; this
		// subscription hears of them a moment later.
		eventually(t, "the look-ups to be heard", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for id, n := range want {
				if gets[id] < n {
					return false
				}
			}
			return true
		})
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, want, gets)
	}

	tb.start(t, worker.Config{Concurrency: 1})
	dir := t.TempDir()
	tb.publish(t, tb.task(0, shell("root", dir, "touch root")))
	require.Equal(t, bus.TaskChanged, tb.next(t).Status)
	tb.publish(t, tb.task(1, shell("root2", dir, "touch root2")))
	require.Equal(t, bus.TaskChanged, tb.next(t).Status)
	child := tb.task(0, shell("child", dir, "touch child"))
	child.RunID = tb.runID + "-a1"
	tb.publish(t, child)
	// (its outcome is on the child run's subject)
	eventually(t, "the child run's task to run", func() bool { return exists(filepath.Join(dir, "child")) })
	heard(map[string]int{tb.runID: 1, child.RunID: 1})

	// Every task so far acked before the reconnection: an ack lost with
	// the connection would have the server deliver that task again, and
	// its delivery look its runs up again (a loaded run of the suite
	// counted the child run twice).
	eventually(t, "the tasks run so far to be acked", func() bool { return backlog(t, tb.bus) == 0 })

	// Cancelled in the bucket, the announcement missed: once the
	// connection is re-established the run is looked up again.
	require.NoError(t, tb.bus.MarkCancelled(t.Context(), tb.runID))
	reconnected := make(chan struct{}, 1)
	tb.bus.Conn().SetReconnectHandler(func(*nats.Conn) {
		select {
		case reconnected <- struct{}{}:
		default:
		}
	})
	require.NoError(t, tb.bus.Conn().ForceReconnect())
	within(t, "the reconnection", func() { <-reconnected })
	tb.publish(t, tb.task(2, shell("late", dir, "touch late")))
	eventually(t, "the cancelled run's task to leave the stream", func() bool { return backlog(t, tb.bus) == 0 })
	heard(map[string]int{tb.runID: 2, child.RunID: 1})
	require.NoFileExists(t, filepath.Join(dir, "late"), "a task of a run cancelled while the worker was away ran")
	tb.none(t, 100*time.Millisecond)
}

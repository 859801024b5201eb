package worker_test

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/worker"
)

// TestRootRunTaskLooksCancellationsUpOnce: before running a task the
// worker looks its runs up in the cancellations bucket; a root run's task
// names its run as RunID and RootRunID, and is looked up once (it was
// twice: a round trip per task message for nothing), a child run's task
// twice (its run and its root). A cancelled root run is still dropped
// (TestCancelledRunIsDroppedByAWorkerThatMissedTheAnnouncement).
func TestRootRunTaskLooksCancellationsUpOnce(t *testing.T) {
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

	tb.start(t, worker.Config{Concurrency: 1})
	dir := t.TempDir()
	tb.publish(t, tb.task(0, shell("root", dir, "touch root")))
	require.Equal(t, bus.TaskChanged, tb.next(t).Status)
	child := tb.task(0, shell("child", dir, "touch child"))
	child.RunID = tb.runID + "-a1"
	tb.publish(t, child)
	// (its outcome is on the child run's subject; the look-ups come
	// before the command runs)
	eventually(t, "the child run's task to run", func() bool { return exists(filepath.Join(dir, "child")) })
	require.FileExists(t, filepath.Join(dir, "root"))

	// The look-ups were made before the command ran; this subscription
	// hears of them a moment later (it failed once in a full run,
	// reading the root run's second look-up before it had arrived).
	eventually(t, "the child's look-ups to be heard", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return gets[tb.runID] >= 2 && gets[child.RunID] >= 1
	})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{tb.runID: 2, child.RunID: 1}, gets,
		"one look-up of the root run for its task, one of each run for the child's")
}

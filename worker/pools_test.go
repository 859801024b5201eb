package worker_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/worker"
)

// TestIdlePoolDoesNotStarveAnother: with one slot and several pools (its
// own pinned pool always among them), a task of any pool runs while the
// others are idle.
func TestIdlePoolDoesNotStarveAnother(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{Name: "solo", Concurrency: 1, Pools: []string{"a", "b"}})
	dir := t.TempDir()
	for i, pool := range []string{"b", "a", bus.PinnedPool("solo"), "b"} {
		task := tb.task(i, shell("t", dir, "true"))
		task.Pool = pool
		tb.publish(t, task)
		o := tb.next(t)
		require.Equal(t, bus.TaskChanged, o.Status, "task of pool %s: %+v", pool, o)
		require.Equal(t, "solo", o.Worker)
	}
}

package bus_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// TestFollowTreeEventsFiltersEveryRun: with kinds, FollowTreeEvents
// delivers the events of those kinds of the root run and of its child
// runs, in the order they were published, and nothing else: no other
// kind, no other tree.
func TestFollowTreeEventsFiltersEveryRun(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	one := 1
	for _, ev := range []bus.Event{
		{Kind: bus.EventRunStarted, RunID: "root"},
		{Kind: bus.EventTaskDispatched, RunID: "root", Task: &one},
		{Kind: bus.EventTaskFinished, RunID: "root", Task: &one},
		{Kind: bus.EventRunStarted, RunID: "child", RootRunID: "root"},
		{Kind: bus.EventTaskDispatched, RunID: "child", RootRunID: "root", Task: &one},
		{Kind: bus.EventTaskFinished, RunID: "child", RootRunID: "root", Task: &one},
		{Kind: bus.EventRunRejected, RunID: "child2", RootRunID: "root"},
		{Kind: bus.EventTaskFinished, RunID: "other", Task: &one},
		{Kind: bus.EventRunFinished, RunID: "child", RootRunID: "root"},
		{Kind: bus.EventRunFinished, RunID: "root"},
	} {
		require.NoError(t, b.PublishEvent(ctx, ev))
	}
	var seen []string
	err := b.FollowTreeEvents(ctx, "root", func(ev bus.Event) bool {
		seen = append(seen, ev.RunID+"/"+string(ev.Kind))
		return ev.Kind != bus.EventRunFinished || ev.RunID != "root"
	}, bus.EventTaskFinished, bus.EventRunRejected, bus.EventRunFinished)
	require.NoError(t, err)
	require.Equal(t, []string{"root/task_finished", "child/task_finished", "child2/run_rejected",
		"child/run_finished", "root/run_finished"}, seen)

	// Without kinds: every event of the tree.
	seen = nil
	err = b.FollowTreeEvents(ctx, "root", func(ev bus.Event) bool {
		seen = append(seen, ev.RunID+"/"+string(ev.Kind))
		return ev.Kind != bus.EventRunFinished || ev.RunID != "root"
	})
	require.NoError(t, err)
	require.Len(t, seen, 9)
}

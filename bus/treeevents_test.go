package bus_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// TreeEventReaders counts the consumers of the events stream that read a
// run tree's events and have some left to be sent: a follower created
// before the events and not reading yet counts, one that has been sent
// them all does not, nor does one of another tree; one without a filter
// reads every tree.
func TestTreeEventReaders(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	js, err := jetstream.New(b.Conn())
	require.NoError(t, err)
	s, err := js.Stream(ctx, bus.StreamEvents)
	require.NoError(t, err)

	readers := func() int {
		t.Helper()
		n, err := b.TreeEventReaders(ctx, "root")
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 0, readers(), "no consumer")

	// A follower of the tree's run_finished events (FollowTreeEvents'
	// filters), created before anything is published.
	follower, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy,
		FilterSubjects: []string{"manifold.events.root.*." + string(bus.EventRunFinished), "manifold.events.root.*." + string(bus.EventRunRejected)}})
	require.NoError(t, err)
	other, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, FilterSubject: bus.EventsOfRun("other")})
	require.NoError(t, err)
	require.Equal(t, 0, readers(), "followers with nothing to read yet")

	for _, id := range []string{"root", "root-a0", "root-a1"} {
		for _, k := range []bus.EventKind{bus.EventRunStarted, bus.EventTaskFinished, bus.EventRunFinished} {
			require.NoError(t, b.PublishEvent(ctx, bus.Event{Kind: k, RunID: id, RootRunID: "root"}))
		}
	}
	require.NoError(t, b.PublishEvent(ctx, bus.Event{Kind: bus.EventRunFinished, RunID: "other", RootRunID: "other"}))
	// Events are published without waiting for the stream, and a
	// consumer's count of pending messages follows the stream's stores
	// in the background: wait until the follower is counted.
	require.Eventually(t, func() bool { return readers() == 1 }, 10*time.Second, time.Millisecond,
		"the tree's follower has three run_finished events to be sent")
	pending := func(c jetstream.Consumer) uint64 {
		info, err := c.Info(ctx)
		require.NoError(t, err)
		return info.NumPending
	}
	require.Eventually(t, func() bool { return pending(other) == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, 1, readers(), "the other tree's follower, behind on its own tree, is not counted")

	// Sent them all: no longer behind.
	batch, err := follower.Fetch(3)
	require.NoError(t, err)
	got := 0
	for range batch.Messages() {
		got++
	}
	require.NoError(t, batch.Error())
	require.Equal(t, 3, got)
	require.Equal(t, 0, readers(), "a follower that has been sent every event of the tree")

	// A reader of the whole stream (no filter) has the tree's events to read.
	all, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy})
	require.NoError(t, err)
	require.Equal(t, uint64(10), pending(all))
	require.Equal(t, 1, readers())
}

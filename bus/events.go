package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// FollowEvents delivers every event of a run tree (runID is its root),
// from the first, to fn in order until fn returns false or ctx ends. With
// kinds, only the root run's events of those kinds are delivered (the
// server filters: a client printing no progress is not sent an event per
// resource). It returns nil when fn stopped it, ctx's error otherwise.
func (b *Bus) FollowEvents(ctx context.Context, runID string, fn func(Event) bool, kinds ...EventKind) error {
	filter := []string{EventsOfRun(runID)}
	if len(kinds) > 0 {
		filter = filter[:0]
		for _, k := range kinds {
			filter = append(filter, EventSubject(runID, runID, k))
		}
	}
	return b.followEvents(ctx, runID, filter, fn)
}

// FollowTreeEvents is FollowEvents with kinds filtering the events of
// every run of the tree, child runs included: a follower that prints no
// status line needs no task_dispatched event, and the server sends it
// none. Without kinds it is FollowEvents.
func (b *Bus) FollowTreeEvents(ctx context.Context, runID string, fn func(Event) bool, kinds ...EventKind) error {
	filter := []string{EventsOfRun(runID)}
	if len(kinds) > 0 {
		filter = filter[:0]
		for _, k := range kinds {
			filter = append(filter, eventsOfKind(runID, k))
		}
	}
	return b.followEvents(ctx, runID, filter, fn)
}

func (b *Bus) followEvents(ctx context.Context, runID string, filter []string, fn func(Event) bool) error {
	c, err := b.js.OrderedConsumer(ctx, StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: filter,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("bus: follow events of %s: %w", runID, err)
	}
	it, err := c.Messages()
	if err != nil {
		return fmt.Errorf("bus: follow events of %s: %w", runID, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("bus: follow events of %s: %w", runID, err)
		}
		var ev Event
		if err := Decode(msg.Data(), &ev); err != nil {
			continue // an event this build cannot read is not a reason to stop following
		}
		if !fn(ev) {
			return nil
		}
	}
}

// eventsOfKind returns the subject filter matching the events of one
// kind of every run of a run tree, given its root run ID.
func eventsOfKind(rootRunID string, kind EventKind) string {
	return "manifold.events." + token(rootRunID) + ".*." + token(string(kind))
}

package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// FollowEvents delivers every event of a run, from the first, to fn in
// order until fn returns false or ctx ends. It returns nil when fn stopped
// it, ctx's error otherwise.
func (b *Bus) FollowEvents(ctx context.Context, runID string, fn func(Event) bool) error {
	c, err := b.js.OrderedConsumer(ctx, StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{EventsOfRun(runID)},
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

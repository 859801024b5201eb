package bus

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A cluster that lost a node answers nothing for a few seconds while it
// elects new stream and consumer leaders. Writes that reached no leader
// ("no responders": nothing received them, so a retry never applies one
// twice) are retried every noLeaderRetry for at most noLeaderWait.
const (
	noLeaderWait  = 10 * time.Second
	noLeaderRetry = 250 * time.Millisecond
)

// noLeader reports whether err says the write reached no leader.
func noLeader(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders)
}

// retryNoLeader calls f until it returns something other than a no-leader
// error, noLeaderWait has passed or ctx ends.
func retryNoLeader[T any](ctx context.Context, f func() (T, error)) (T, error) {
	deadline := time.Now().Add(noLeaderWait)
	for {
		v, err := f()
		if !noLeader(err) || time.Now().Add(noLeaderRetry).After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(noLeaderRetry):
		}
	}
}

package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// AckNoWait acknowledges a pulled task without waiting for the server's
// confirmation: the acknowledgement goes out on the connection before
// anything the caller sends next (the next pull among them), and a
// worker does not spend a round trip per task on it. Call it only once
// the task's outcomes are durable (their publications acknowledged): an
// acknowledgement that is lost leaves the task to be redelivered after
// the consumer's AckWait, and the worker answers that delivery from its
// record (a resource that changed or failed) or checks the resource
// again (a stable one), as for any redelivery. A task read from the
// pinned stream (no consumer) is settled as Ack does.
func (d *Delivery) AckNoWait(ctx context.Context) error {
	if p, ok := d.m.(pulled); ok {
		if err := p.m.Ack(); err != nil && !errors.Is(err, nats.ErrMsgAlreadyAckd) {
			return fmt.Errorf("bus: ack: %w", err)
		}
		return nil
	}
	return d.Ack(ctx)
}

package bus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Consumer pulls messages one at a time from a durable work-queue consumer.
// Any number of processes may bind to the same durable; each message goes
// to one of them.
type Consumer struct {
	c jetstream.Consumer
}

// Delivery is one message handed to a consumer. Ack only after the work it
// stands for is durable.
type Delivery struct {
	msg jetstream.Msg
	// Attempt is the JetStream delivery count (1 on first delivery).
	Attempt int
	// Ctx carries the trace context from the message headers.
	Ctx context.Context
}

// Data returns the message body.
func (d *Delivery) Data() []byte { return d.msg.Data() }

// Subject returns the message subject.
func (d *Delivery) Subject() string { return d.msg.Subject() }

// Ack acknowledges the message and waits for the server to confirm.
func (d *Delivery) Ack(ctx context.Context) error {
	if _, err := retryNoLeader(ctx, func() (struct{}, error) { return struct{}{}, d.msg.DoubleAck(ctx) }); err != nil {
		return fmt.Errorf("bus: ack: %w", err)
	}
	return nil
}

// InProgress resets the redelivery timer: call it on a ticker while working.
func (d *Delivery) InProgress() error { return d.msg.InProgress() }

// Nak asks for redelivery after delay.
func (d *Delivery) Nak(delay time.Duration) error { return d.msg.NakWithDelay(delay) }

// Term stops redelivery of a message that can never be handled.
func (d *Delivery) Term(reason string) error { return d.msg.TermWithReason(reason) }

// ConsumerOpts tune a consumer.
type ConsumerOpts struct {
	// AckWait defaults to the bus's TaskAckWait.
	AckWait time.Duration
	// MaxDeliver defaults to the bus's TaskMaxDeliver; -1 is unlimited.
	MaxDeliver int
	// InactiveThreshold removes the consumer after that long without
	// clients; zero keeps it.
	InactiveThreshold time.Duration
}

func (b *Bus) consumer(ctx context.Context, stream, durable, filter string, o ConsumerOpts) (*Consumer, error) {
	cfg := jetstream.ConsumerConfig{
		Durable:           durable,
		FilterSubject:     filter,
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           durationOr(o.AckWait, b.cfg.TaskAckWait),
		MaxDeliver:        o.MaxDeliver,
		MaxAckPending:     -1,
		InactiveThreshold: o.InactiveThreshold,
		Replicas:          b.cfg.Replicas,
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = b.cfg.TaskMaxDeliver
	}
	c, err := b.js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("bus: consumer %s on %s: %w", durable, stream, err)
	}
	return &Consumer{c: c}, nil
}

// TaskConsumer binds to the durable consumer of a pool's tasks.
func (b *Bus) TaskConsumer(ctx context.Context, pool string) (*Consumer, error) {
	if err := ValidToken(pool); err != nil {
		return nil, fmt.Errorf("bus: pool name: %w", err)
	}
	return b.consumer(ctx, StreamTasks, "tasks-"+pool, TaskSubject(pool), ConsumerOpts{})
}

// PinnedTaskConsumer binds to the consumer of the pool only the named
// worker takes; it goes away an hour after its worker is gone.
func (b *Bus) PinnedTaskConsumer(ctx context.Context, worker string) (*Consumer, error) {
	pool := PinnedPool(worker)
	if err := ValidToken(pool); err != nil {
		return nil, fmt.Errorf("bus: worker name: %w", err)
	}
	return b.consumer(ctx, StreamTasks, "tasks-"+pool, TaskSubject(pool), ConsumerOpts{InactiveThreshold: time.Hour})
}

// RunRequestConsumer binds to the durable consumer of run requests shared
// by all coordinators.
func (b *Bus) RunRequestConsumer(ctx context.Context) (*Consumer, error) {
	return b.consumer(ctx, StreamRuns, "coordinators", SubjectRunSubmit, ConsumerOpts{MaxDeliver: -1})
}

// OutcomeConsumer binds to a durable consumer of one run's history (tools and
// tests that read outcomes as they come; coordinators read histories with
// OpenHistory).
func (b *Bus) OutcomeConsumer(ctx context.Context, runID string) (*Consumer, error) {
	// A short AckWait: outcomes a dead coordinator held come back quickly
	// to the one resuming the run (handling an outcome takes milliseconds).
	return b.consumer(ctx, StreamHistory, "outcomes-"+token(runID), OutcomeSubject(runID),
		ConsumerOpts{AckWait: 5 * time.Second, MaxDeliver: -1, InactiveThreshold: time.Hour})
}

// DeleteOutcomeConsumer removes a finished run's outcome consumer.
func (b *Bus) DeleteOutcomeConsumer(ctx context.Context, runID string) error {
	err := b.js.DeleteConsumer(ctx, StreamHistory, "outcomes-"+token(runID))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("bus: delete outcome consumer of %s: %w", runID, err)
	}
	return nil
}

// Waiting returns how many pull requests wait on the consumer and how
// many it takes at most (more are refused: see Next).
func (c *Consumer) Waiting(ctx context.Context) (waiting, max int, err error) {
	info, err := c.c.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("bus: consumer info: %w", err)
	}
	return info.NumWaiting, info.Config.MaxWaiting, nil
}

// Next blocks until a message arrives or ctx ends (then it returns ctx's
// error).
func (c *Consumer) Next(ctx context.Context) (*Delivery, error) {
	refused := 0 // pulls refused in a row
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		batch, err := c.c.Fetch(1, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, nats.ErrConnectionClosed) {
				return nil, fmt.Errorf("bus: fetch: %w", err)
			}
			// Transient (reconnecting, leader election): try again shortly.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		var msg jetstream.Msg
	wait:
		for {
			select {
			case m, ok := <-batch.Messages():
				if !ok {
					break wait
				}
				msg = m
			case <-ctx.Done():
				cancel()
				if msg != nil {
					// Taken but not handed out: let it go to another
					// consumer at once.
					_ = msg.Nak()
				}
				return nil, ctx.Err()
			}
		}
		cancel()
		if msg == nil {
			// The server refused the pull (409: too many waiting pulls
			// on the consumer, a leader change): fetching again at once
			// spins on both sides, so back off, with jitter.
			if batch.Error() != nil {
				refused++
				if err := sleepCtx(ctx, refusedBackoff(refused)); err != nil {
					return nil, err
				}
			}
			continue
		}
		refused = 0
		d := &Delivery{msg: msg, Attempt: 1, Ctx: ExtractTrace(context.Background(), msg.Headers())}
		if md, err := msg.Metadata(); err == nil {
			d.Attempt = int(md.NumDelivered)
		}
		return d, nil
	}
}

// refusedBackoff is the wait after the n-th pull refused in a row: 50 ms
// doubling up to 2 s, each between half and one and a half of that.
func refusedBackoff(n int) time.Duration {
	d := 50 * time.Millisecond << min(n-1, 6)
	d = min(d, 2*time.Second)
	return d/2 + time.Duration(rand.Int64N(int64(d)))
}

// sleepCtx waits d or until ctx ends (returning its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

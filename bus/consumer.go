package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Consumer pulls messages one at a time from a durable work-queue consumer.
// Any number of processes may bind to the same durable; each message goes
// to one of them. A Consumer keeps one inbox subscription for its pulls
// (made on the first Next, dropped when a Next ends with its context), so
// an idle consumer costs one pull request per pullExpiry, not a
// subscription per fetch. Next calls on one Consumer take turns: bind one
// Consumer per puller.
type Consumer struct {
	c    jetstream.Consumer // nil until created or looked up (lazy binds)
	nc   *nats.Conn
	next string // API subject of pull requests

	// create makes the durable (CreateOrUpdateConsumer). A lazy Consumer
	// (a pool's tasks: every worker binds it) does not call it at bind:
	// its first Next looks the durable's name up in the stream's
	// consumer names (exists) and creates it only when it is not there,
	// or when a pull is answered 409 consumer deleted (or 503). The
	// create request is answered with the consumer's info, whose
	// making walks every waiting pull: at 10,000 workers, N starts x N
	// pulls; the names request walks the stream's few consumers.
	create func(ctx context.Context) (jetstream.Consumer, error)
	exists func(ctx context.Context) (bool, error)
	bound  bool // the consumer is known to exist

	turn chan struct{} // held by the Next in progress

	// Owned by the Next holding turn.
	inbox  string
	sub    *nats.Subscription
	msgs   chan *nats.Msg
	status chan nats.Status // reconnections: the pull waiting on the old server is gone
	pulls  uint64
	// probing: the consumer was deleted under a pull (409 consumer
	// deleted, 503) and bound again; the next pull is a short one
	// (probeRequest), in case the bind saw it before it was gone.
	probing bool
}

// Delivery is one message handed to a consumer. Ack only after the work it
// stands for is durable.
type Delivery struct {
	m delivered
	// Attempt is the JetStream delivery count (1 on first delivery).
	Attempt int
	// Ctx carries the trace context from the message headers.
	Ctx context.Context
}

// delivered is what a Delivery settles: a message pulled from a consumer,
// or a pinned task read from the stream (pinned.go).
type delivered interface {
	Data() []byte
	Subject() string
	ack(ctx context.Context) error
	inProgress() error
	nak(delay time.Duration) error
	term(reason string) error
}

// Data returns the message body.
func (d *Delivery) Data() []byte { return d.m.Data() }

// Subject returns the message subject.
func (d *Delivery) Subject() string { return d.m.Subject() }

// Ack acknowledges the message and waits for the server to confirm.
func (d *Delivery) Ack(ctx context.Context) error {
	if _, err := retryNoLeader(ctx, func() (struct{}, error) { return struct{}{}, d.m.ack(ctx) }); err != nil {
		return fmt.Errorf("bus: ack: %w", err)
	}
	return nil
}

// InProgress resets the redelivery timer: call it on a ticker while working.
func (d *Delivery) InProgress() error { return d.m.inProgress() }

// Nak asks for redelivery after delay.
func (d *Delivery) Nak(delay time.Duration) error { return d.m.nak(delay) }

// Term stops redelivery of a message that can never be handled.
func (d *Delivery) Term(reason string) error { return d.m.term(reason) }

// pulled is a message a pull request brought: settled on its $JS.ACK
// reply subject.
type pulled struct{ m *nats.Msg }

func (p pulled) Data() []byte      { return p.m.Data }
func (p pulled) Subject() string   { return p.m.Subject }
func (p pulled) inProgress() error { return p.m.InProgress() }
func (p pulled) ack(ctx context.Context) error {
	err := p.m.AckSync(nats.Context(ctx))
	if errors.Is(err, nats.ErrMsgAlreadyAckd) {
		return nil
	}
	return err
}
func (p pulled) nak(delay time.Duration) error { return p.m.NakWithDelay(delay) }
func (p pulled) term(reason string) error {
	if reason == "" {
		return p.m.Term()
	}
	return p.m.Respond([]byte("+TERM " + reason))
}

// ConsumerOpts tune a consumer.
type ConsumerOpts struct {
	// AckWait defaults to the bus's TaskAckWait.
	AckWait time.Duration
	// MaxDeliver defaults to the bus's TaskMaxDeliver; -1 is unlimited.
	MaxDeliver int
	// InactiveThreshold removes the consumer after that long without
	// clients; zero keeps it.
	InactiveThreshold time.Duration
	// MaxWaiting caps the pull requests waiting on the consumer; zero
	// takes the server's default (512).
	MaxWaiting int
}

func (b *Bus) consumer(ctx context.Context, stream, durable, filter string, o ConsumerOpts) (*Consumer, error) {
	c := b.lazyConsumer(stream, durable, filter, o)
	cc, err := c.create(ctx)
	if err != nil {
		return nil, err
	}
	c.c, c.bound = cc, true
	return c, nil
}

// lazyConsumer returns a Consumer of durable that creates it only when a
// pull finds it missing (see Consumer.create).
func (b *Bus) lazyConsumer(stream, durable, filter string, o ConsumerOpts) *Consumer {
	c := &Consumer{nc: b.nc, next: b.apiPrefix() + "CONSUMER.MSG.NEXT." + stream + "." + durable,
		turn: make(chan struct{}, 1)}
	c.create = func(ctx context.Context) (jetstream.Consumer, error) {
		return b.createConsumer(ctx, stream, durable, filter, o)
	}
	c.exists = func(ctx context.Context) (bool, error) {
		return b.consumerExists(ctx, stream, durable)
	}
	return c
}

// consumerExists looks durable up in stream's consumer names (a request
// that walks the stream's consumers, not their waiting pulls).
func (b *Bus) consumerExists(ctx context.Context, stream, durable string) (bool, error) {
	for offset := 0; ; {
		m, err := b.nc.RequestWithContext(ctx, b.apiPrefix()+"CONSUMER.NAMES."+stream, fmt.Appendf(nil, `{"offset":%d}`, offset))
		if err != nil {
			return false, fmt.Errorf("bus: consumers of %s: %w", stream, err)
		}
		var resp struct {
			Total     int      `json:"total"`
			Consumers []string `json:"consumers"`
			Error     *struct {
				Code        int    `json:"code"`
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &resp); err != nil {
			return false, fmt.Errorf("bus: consumers of %s: %w", stream, err)
		}
		if resp.Error != nil {
			return false, fmt.Errorf("bus: consumers of %s: %s (%d)", stream, resp.Error.Description, resp.Error.Code)
		}
		if slices.Contains(resp.Consumers, durable) {
			return true, nil
		}
		offset += len(resp.Consumers)
		if len(resp.Consumers) == 0 || offset >= resp.Total {
			return false, nil
		}
	}
}

func (b *Bus) createConsumer(ctx context.Context, stream, durable, filter string, o ConsumerOpts) (jetstream.Consumer, error) {
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
	cfg.MaxWaiting = o.MaxWaiting
	c, err := b.js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil && cfg.MaxWaiting != 0 && strings.Contains(err.Error(), "max waiting can not be updated") {
		// Created with another MaxWaiting (an earlier version, or
		// another PoolMaxWaiting): the server keeps it; so do we.
		var existing jetstream.Consumer
		if existing, err = b.js.Consumer(ctx, stream, durable); err == nil {
			cfg.MaxWaiting = existing.CachedInfo().Config.MaxWaiting
			c, err = b.js.CreateOrUpdateConsumer(ctx, stream, cfg)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bus: consumer %s on %s: %w", durable, stream, err)
	}
	return c, nil
}

// apiPrefix is the prefix of JetStream API subjects in the bus's domain.
func (b *Bus) apiPrefix() string {
	if b.cfg.Domain != "" {
		return "$JS." + b.cfg.Domain + ".API."
	}
	return "$JS.API."
}

// TaskConsumer binds to the durable consumer of a pool's tasks.
func (b *Bus) TaskConsumer(ctx context.Context, pool string) (*Consumer, error) {
	if err := ValidToken(pool); err != nil {
		return nil, fmt.Errorf("bus: pool name: %w", err)
	}
	// Bound lazily: no request at all here (see Consumer.create). A
	// consumer that exists keeps its configuration: a changed TaskAckWait
	// or PoolMaxWaiting applies when it is created again.
	return b.lazyConsumer(taskStream(pool), "tasks-"+pool, TaskSubject(pool), ConsumerOpts{MaxWaiting: b.cfg.PoolMaxWaiting}), nil
}

// PinnedTaskConsumer binds to a durable consumer of the pool only the
// named worker takes; it goes away an hour after its worker is gone.
// Workers read their pinned tasks with PinnedTasks instead, which needs no
// consumer (a consumer per worker stops a fleet at the server's 1,000
// consumers per stream); this stays for tools that drain such a pool.
func (b *Bus) PinnedTaskConsumer(ctx context.Context, worker string) (*Consumer, error) {
	pool := PinnedPool(worker)
	if err := ValidToken(pool); err != nil {
		return nil, fmt.Errorf("bus: worker name: %w", err)
	}
	return b.consumer(ctx, StreamPinned, "tasks-"+pool, TaskSubject(pool), ConsumerOpts{InactiveThreshold: time.Hour})
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
	if c.c == nil {
		if c.c, err = c.create(ctx); err != nil {
			return 0, 0, err
		}
		c.bound = true
	}
	info, err := c.c.Info(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("bus: consumer info: %w", err)
	}
	return info.NumWaiting, info.Config.MaxWaiting, nil
}

// pullExpiry is how long one pull request waits on the server for a
// message; pullHeartbeat is how often the server says an idle pull is
// still waiting; pullGrace is how much longer than two heartbeats Next
// waits for word of its pull before it pulls again (a pull lost without
// the server saying so). Each pull that arrives, expires or is due a
// heartbeat runs the consumer's loop over every waiting pull: with N
// idle workers that is N x (2/pullExpiry + 1/pullHeartbeat) loops a
// second, each walking N pulls (30 s pulls without heartbeats: N x 2/30;
// 5 minutes with a heartbeat a minute: N x 0.0233; now 15 minutes with a
// heartbeat every 5: N x 0.0056, 4.2 times fewer, 12 times fewer than 30
// s pulls). A pull is rarely lost unannounced: a reconnection is seen
// (Next pulls again at once), and a clustered consumer's new leader
// answers the pulls its predecessor held 409 Leadership Change (they are
// replicated), which Next pulls again after; the heartbeat is the
// backstop for the rest, a pull lost some other way being sent again
// after 10 minutes 5 s. The server refuses a heartbeat above half the
// expiry.
const (
	// namesWait bounds the consumer names lookup of a lazy bind.
	namesWait     = 2 * time.Second
	pullExpiry    = 15 * time.Minute
	pullHeartbeat = 5 * time.Minute
	pullGrace     = 5 * time.Second
)

// pullRequest is the body of a pull: one message, pullExpiry, a heartbeat
// every pullHeartbeat.
var pullRequest = fmt.Appendf(nil, `{"batch":1,"expires":%d,"idle_heartbeat":%d}`, pullExpiry.Nanoseconds(), pullHeartbeat.Nanoseconds())

// probeExpiry is the expiry of the first pull after a consumer deleted
// under a pull was bound again. A deleted consumer answers its waiting
// pulls 409 before it is gone from the stream: a worker hearing it may
// find the name still listed (or, creating it, the old one still there),
// and send its next pull to a consumer that no longer exists, which the
// server drops without a word; with pullRequest it was heard of again
// 10 minutes 5 s later (TestTaskConsumerBindsWithoutCreate under load:
// 1 run in 20 lost a task for 20 s). A probe that expires is answered
// 408 by a consumer that exists; one that is not answered within
// probeExpiry and pullGrace was lost, and the consumer is bound again.
const probeExpiry = 2 * time.Second

var probeRequest = fmt.Appendf(nil, `{"batch":1,"expires":%d}`, probeExpiry.Nanoseconds())

// Next blocks until a message arrives or ctx ends (then it returns ctx's
// error). One pull request of one message is outstanding while it waits;
// concurrent calls on one Consumer take turns.
func (c *Consumer) Next(ctx context.Context) (*Delivery, error) {
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.turn }()
	refused := 0 // pulls refused in a row
	for {
		if err := ctx.Err(); err != nil {
			c.unsubscribe()
			return nil, err
		}
		if c.nc.IsClosed() {
			c.unsubscribe()
			return nil, fmt.Errorf("bus: fetch: %w", nats.ErrConnectionClosed)
		}
		if c.sub == nil {
			if err := c.subscribe(); err != nil {
				return nil, err
			}
		}
		if !c.bound {
			err := c.bind(ctx)
			if err != nil {
				if ctx.Err() != nil {
					c.unsubscribe()
					return nil, ctx.Err()
				}
				// Transient (no JetStream leader, a slow server): try
				// again, backing off.
				refused++
				if err := sleepCtx(ctx, refusedBackoff(refused)); err != nil {
					c.unsubscribe()
					return nil, err
				}
				continue
			}
		}
		c.pulls++
		reply := c.inbox + "." + strconv.FormatUint(c.pulls, 36)
		body, wait := pullRequest, 2*pullHeartbeat+pullGrace
		if c.probing {
			body, wait = probeRequest, probeExpiry+pullGrace
		}
		if err := c.nc.PublishRequest(c.next, reply, body); err != nil {
			if errors.Is(err, nats.ErrConnectionClosed) {
				c.unsubscribe()
				return nil, fmt.Errorf("bus: fetch: %w", err)
			}
			// Transient (reconnecting): try again shortly.
			if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
				c.unsubscribe()
				return nil, err
			}
			continue
		}
		m, end, err := c.await(ctx, reply, wait)
		if err != nil {
			c.unsubscribe()
			return nil, err
		}
		if c.probing && (m != nil || end == pullExpired) {
			c.probing = false // the consumer answered: it exists
		}
		if m != nil {
			d := &Delivery{m: pulled{m}, Attempt: 1, Ctx: ExtractTrace(context.Background(), m.Header)}
			if md, err := m.Metadata(); err == nil {
				d.Attempt = int(md.NumDelivered)
			}
			return d, nil
		}
		switch end {
		case pullLost:
			if c.probing {
				// Sent to a consumer gone by then (probeExpiry).
				c.bound = false
			}
			refused = 0
			continue
		case pullExpired:
			refused = 0
			continue
		case pullNoConsumer:
			// Deleted (a stream recreated, an operator): look it up and
			// create it again, and probe it (probeExpiry).
			c.bound, c.probing = false, true
			continue
		}
		// The server refused the pull (409: too many waiting pulls on
		// the consumer, a leader change): pulling again at once spins on
		// both sides, so back off, with jitter.
		refused++
		if err := sleepCtx(ctx, refusedBackoff(refused)); err != nil {
			c.unsubscribe()
			return nil, err
		}
	}
}

// bind makes sure the consumer exists: looked up by name, created when it
// is not there.
func (c *Consumer) bind(ctx context.Context) error {
	// Credentials of earlier deployments do not allow the names
	// request (it is then not answered): after namesWait, create as
	// before.
	lookup, cancel := context.WithTimeout(ctx, namesWait)
	ok, err := c.exists(lookup)
	cancel()
	if err != nil && ctx.Err() != nil {
		return err
	}
	if err != nil || !ok {
		cc, err := c.create(ctx)
		if err != nil {
			return err
		}
		c.c = cc
	}
	c.bound = true
	return nil
}

// How a pull ended without a message.
type pullEnd int

const (
	pullExpired    pullEnd = iota // 404/408: no message in time; the consumer exists
	pullLost                      // no word within the wait, or a reconnection
	pullNoConsumer                // 503 no responders, 409 consumer deleted
	pullRefused                   // any other status (409 too many waiting, leader change)
)

// await waits for a message or for the end of the pull answered on reply
// (its expiry, a refusal, a reconnection, or no word within wait; an idle
// heartbeat restarts the wait).
func (c *Consumer) await(ctx context.Context, reply string, wait time.Duration) (*nats.Msg, pullEnd, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case m := <-c.msgs:
			if strings.HasPrefix(m.Reply, "$JS.ACK.") {
				// A message, of this pull or of one given up on before:
				// either is ours to handle.
				return m, 0, nil
			}
			if m.Subject != reply {
				continue // the end of an earlier pull
			}
			switch code := m.Header.Get("Status"); code {
			case "100": // idle heartbeat: the pull still waits
				t.Reset(wait)
				continue
			case "404", "408": // no message in time: pull again
				return nil, pullExpired, nil
			case "503":
				return nil, pullNoConsumer, nil
			default:
				if code == "409" && strings.Contains(strings.ToLower(m.Header.Get("Description")), "consumer deleted") {
					return nil, pullNoConsumer, nil
				}
				return nil, pullRefused, nil
			}
		case <-c.status:
			return nil, pullLost, nil
		case <-t.C:
			return nil, pullLost, nil
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

// subscribe makes the inbox subscription the pulls are answered on.
func (c *Consumer) subscribe() error {
	c.inbox = c.nc.NewInbox()
	c.msgs = make(chan *nats.Msg, 64)
	sub, err := c.nc.ChanSubscribe(c.inbox+".*", c.msgs)
	if err != nil {
		return fmt.Errorf("bus: fetch: %w", err)
	}
	c.sub = sub
	c.status = c.nc.StatusChanged(nats.CONNECTED)
	return nil
}

// unsubscribe drops the inbox subscription (the Next holding it ended
// with its context): a message a pull brought after that goes back to the
// consumer at once.
func (c *Consumer) unsubscribe() {
	if c.sub == nil {
		return
	}
	_ = c.sub.Unsubscribe()
	c.nc.RemoveStatusListener(c.status)
	for {
		select {
		case m := <-c.msgs:
			if strings.HasPrefix(m.Reply, "$JS.ACK.") {
				_ = m.Nak()
			}
			continue
		default:
		}
		break
	}
	c.sub, c.msgs, c.status = nil, nil, nil
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

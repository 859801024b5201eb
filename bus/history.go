package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A run's history is the sequence of facts that move it on, in the order
// the stream stored them: worker outcomes, child-run outcomes, deadlines
// that passed, a cancellation. They are messages on the run's outcome
// subject (OutcomeSubject), kept in StreamHistory for the run's lifetime
// (limits retention, purged when the run ends), so a coordinator resuming
// the run rebuilds its state by reading them again from the first.

// FactKind tells what a history message says. The zero value is a task
// outcome from a worker or a child run.
type FactKind string

// Fact kinds beyond task outcomes.
const (
	// FactOutcome is a task's outcome (the zero value, omitted on the wire).
	FactOutcome FactKind = ""
	// FactDeadline says the deadline of task Task's attempt Attempt passed
	// with no outcome.
	FactDeadline FactKind = "deadline"
	// FactCancel says the run was cancelled.
	FactCancel FactKind = "cancel"
	// FactBatch is a message carrying several task outcomes of one run
	// (Outcome.Outcomes), published by a worker for a segment task that
	// asked for it (Task.BatchOutcomes). History readers hand out its
	// outcomes as entries of their own; it is never a fact itself.
	FactBatch FactKind = "batch"
)

// HistoryEntry is one fact of a run's history: a message, or one
// outcome of a batch (FactBatch).
type HistoryEntry struct {
	// Seq is the message's stream sequence; the outcomes of one batch
	// share it.
	Seq uint64
	// Rest is the number of entries of the same message still to come
	// after this one: 0 for a message of one fact and for a batch's last
	// outcome. A reader that catches up at a sequence has caught up once
	// it read the entry of that sequence with Rest 0.
	Rest int
	// Outcome is the decoded fact.
	Outcome Outcome
	// Err is set when the message could not be decoded.
	Err error
	// Ctx carries the trace context of the message's headers.
	Ctx context.Context
}

// PurgeHistory removes a run's history: the run has ended and its report
// is stored.
//
// One purge request: looking the stream up first (nats.go's Stream, then
// Purge) asked the server for the stream's info at every run's end, the
// costliest request it answers (200-243 µs of its CPU a host in a
// 10,000-host fleet run).
func (b *Bus) PurgeHistory(ctx context.Context, runID string) error {
	if err := b.purgeSubject(ctx, StreamHistory, OutcomeSubject(runID)); err != nil {
		return fmt.Errorf("bus: purge history of %s: %w", runID, err)
	}
	return nil
}

// PublishFact appends a fact to a run's history and returns once it is
// durable. A non-empty msgID makes the stream drop a second copy published
// within its duplicate window.
func (b *Bus) PublishFact(ctx context.Context, o Outcome, msgID string) error {
	o.V = Version
	return b.publish(ctx, OutcomeSubject(o.RunID), msgID, o)
}

// Pending is a publication in flight: Wait returns once the stream stored
// the message, or why it did not.
type Pending struct {
	b   *Bus
	ctx context.Context
	f   jetstream.PubAckFuture
	err error
	// what to publish again when no stream leader answered
	subject, msgID string
	data           []byte
}

// Wait blocks until the stream acknowledged the message or ctx ends.
func (p *Pending) Wait(ctx context.Context) error {
	if p.err != nil {
		return p.err
	}
	stall := time.NewTimer(pubAckStall)
	defer stall.Stop()
	var err error
	select {
	case <-p.f.Ok():
		return nil
	case <-stall.C:
		err = nats.ErrTimeout // no acknowledgement yet: publish again
	case err = <-p.f.Err():
	case <-ctx.Done():
		return ctx.Err()
	}
	// A cluster electing a leader, or an acknowledgement lost with a node:
	// publish again, and again, until it is stored or ctx ends (the
	// message ID, if any, keeps one copy; a result record is the same put
	// twice; an outcome twice is taken once).
	for retryablePublish(err) {
		if err = p.b.publishData(ctx, p.subject, p.msgID, p.data, p.ctx); err == nil {
			return nil
		}
		t := time.NewTimer(250 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("bus: publish %s: %w", p.subject, err)
		case <-t.C:
		}
	}
	return fmt.Errorf("bus: publish %s: %w", p.subject, err)
}

// pubAckStall is how long Wait waits for an acknowledgement before it
// publishes again.
const pubAckStall = 10 * time.Second

// retryablePublish reports whether a publication may have failed only
// because the cluster was busy electing or lost the acknowledgement.
func retryablePublish(err error) bool {
	return noLeader(err) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// publishAsync publishes without waiting for the stream's acknowledgement.
func (b *Bus) publishAsync(ctx context.Context, subject, msgID string, data []byte) *Pending {
	msg := nats.NewMsg(subject)
	msg.Data = data
	InjectTrace(ctx, msg.Header)
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	f, err := b.js.PublishMsgAsync(msg, opts...)
	if err != nil {
		return &Pending{err: fmt.Errorf("bus: publish %s: %w", subject, err)}
	}
	return &Pending{b: b, ctx: ctx, f: f, subject: subject, msgID: msgID, data: data}
}

// PublishTaskAsync publishes a task with its message ID without waiting:
// call Wait on the result, and publish again (same ID, so the stream keeps
// one copy) when it fails.
func (b *Bus) PublishTaskAsync(ctx context.Context, t Task) *Pending {
	t.V = Version
	if err := ValidToken(t.Pool); err != nil {
		return &Pending{err: fmt.Errorf("bus: pool name: %w", err)}
	}
	data, err := MarshalTask(&t) // not encode(t): a task in an interface is a copy on the heap
	if err != nil {
		return &Pending{err: fmt.Errorf("bus: encode: %w", err)}
	}
	if len(data) > b.inlineMax() {
		// Too large for one message: store the task (without its tokens)
		// where only coordinators write, send a reference.
		env, err := b.putTask(ctx, t)
		if err != nil {
			return &Pending{err: err}
		}
		if data, err = encode(env); err != nil {
			return &Pending{err: err}
		}
	}
	return b.publishAsync(ctx, TaskSubject(t.Pool), t.MsgID(), data)
}

// inlineMax is the largest message published as is: the server's maximum
// payload, less room for headers.
func (b *Bus) inlineMax() int {
	if b.cfg.InlineMax > 0 {
		return b.cfg.InlineMax
	}
	return int(b.nc.MaxPayload()) - 16<<10
}

// ResolveTask returns the whole task of a task that travelled by
// reference (Ref set), t itself otherwise.
func (b *Bus) ResolveTask(ctx context.Context, t Task) (Task, error) {
	if t.Ref == "" {
		return t, nil
	}
	full, err := b.getTask(ctx, t)
	if err != nil {
		return t, fmt.Errorf("bus: task %s by reference: %w", t.MsgID(), err)
	}
	if full.RunID != t.RunID || full.Task != t.Task || full.Attempt != t.Attempt {
		return t, fmt.Errorf("bus: task %s by reference: the stored task is %s", t.MsgID(), full.MsgID())
	}
	return full, nil
}

// PublishOutcomeAsync publishes a task outcome without waiting.
func (b *Bus) PublishOutcomeAsync(ctx context.Context, o Outcome) *Pending {
	o.V = Version
	return b.publishAsync(ctx, OutcomeSubject(o.RunID), "", MarshalOutcome(&o))
}

// PublishEventNoAck publishes a progress event into the events stream
// without asking for the stream's acknowledgement (a core publish on the
// stream's subject): for the per-resource events of a run, which hold no
// state, so that they cost the server one stored message and no reply.
// Messages of one connection are stored in the order they were sent.
func (b *Bus) PublishEventNoAck(ctx context.Context, ev Event) error {
	subject, data, err := encodeEvent(ev)
	if err != nil {
		return err
	}
	msg := nats.NewMsg(subject)
	msg.Data = data
	InjectTrace(ctx, msg.Header)
	if err := b.nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("bus: publish event: %w", err)
	}
	return nil
}

// encodeEvent stamps an event (version, time) and returns its subject
// and body.
func encodeEvent(ev Event) (string, []byte, error) {
	ev.V = Version
	if ev.Time.IsZero() {
		ev.Time = nowUTC()
	}
	root := ev.RootRunID
	if root == "" {
		root = ev.RunID
	}
	data, err := ev.appendJSON(nil)
	return EventSubject(root, ev.RunID, ev.Kind), data, err
}

// PutResultAsync stores a finished task's outcome record in the results
// bucket (see Results) without waiting.
func (b *Bus) PutResultAsync(ctx context.Context, key string, value []byte) *Pending {
	return b.publishAsync(ctx, b.kvPutSubject(BucketResults, key), "", value)
}

// kvPutSubject is the subject a put of key in bucket is published on:
// $KV.<bucket>.<key>, prefixed with $JS.<domain>.API. for a client of
// another JetStream domain (a leafnode server denies $KV.> across
// domains; the domain's server maps the prefixed subject back), as
// nats.go's KV puts.
func (b *Bus) kvPutSubject(bucket, key string) string {
	subject := "$KV." + bucket + "." + key
	if b.cfg.Domain != "" {
		subject = "$JS." + b.cfg.Domain + ".API." + subject
	}
	return subject
}

func encode(v any) ([]byte, error) {
	if data, ok := encodeFast(v); ok {
		return data, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("bus: encode: %w", err)
	}
	return data, nil
}

func nowUTC() time.Time { return time.Now().UTC() }

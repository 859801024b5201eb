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
	// FactReleased says a worker gave tasks Task..Through of a segment
	// back unexecuted: an earlier task of the segment failed or was
	// skipped, so the coordinator decides on them again.
	FactReleased FactKind = "released"
	// FactDeadline says the deadline of task Task's attempt Attempt passed
	// with no outcome.
	FactDeadline FactKind = "deadline"
	// FactCancel says the run was cancelled.
	FactCancel FactKind = "cancel"
)

// HistoryEntry is one message of a run's history.
type HistoryEntry struct {
	// Seq is the message's stream sequence.
	Seq uint64
	// Outcome is the decoded fact.
	Outcome Outcome
	// Err is set when the message could not be decoded.
	Err error
	// Ctx carries the trace context of the message's headers.
	Ctx context.Context
}

// History reads a run's history in order, from the first fact, then
// follows new facts as they are stored.
type History struct {
	it   jetstream.MessagesContext
	last uint64
}

// OpenHistory opens the history of a run for reading from its first fact.
// Last is the sequence of the newest fact stored when it was opened (0 for
// none): a resuming reader has replayed the past once it has read it.
func (b *Bus) OpenHistory(ctx context.Context, runID string) (*History, error) {
	subject := OutcomeSubject(runID)
	last := uint64(0)
	st, err := b.js.Stream(ctx, StreamHistory)
	if err != nil {
		return nil, fmt.Errorf("bus: history of %s: %w", runID, err)
	}
	switch m, err := st.GetLastMsgForSubject(ctx, subject); {
	case err == nil:
		last = m.Sequence
	case errors.Is(err, jetstream.ErrMsgNotFound):
	default:
		return nil, fmt.Errorf("bus: history of %s: %w", runID, err)
	}
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("bus: history of %s: %w", runID, err)
	}
	// Short heartbeats: when the node holding this (R1, ephemeral) ordered
	// consumer is lost, the client notices within seconds and recreates it
	// from the last sequence read.
	it, err := c.Messages(jetstream.PullMaxMessages(512), jetstream.PullExpiry(4*time.Second), jetstream.PullHeartbeat(time.Second))
	if err != nil {
		return nil, fmt.Errorf("bus: history of %s: %w", runID, err)
	}
	return &History{it: it, last: last}, nil
}

// Last is the sequence of the newest fact stored when the history was
// opened, 0 when there was none.
func (h *History) Last() uint64 { return h.last }

// Next blocks until the next fact is there. It returns an error once Stop
// was called or the connection closed.
func (h *History) Next() (HistoryEntry, error) {
	msg, err := h.it.Next()
	if err != nil {
		return HistoryEntry{}, fmt.Errorf("bus: history: %w", err)
	}
	e := HistoryEntry{Ctx: ExtractTrace(context.Background(), msg.Headers())}
	if md, err := msg.Metadata(); err == nil {
		e.Seq = md.Sequence.Stream
	}
	e.Err = Decode(msg.Data(), &e.Outcome)
	return e, nil
}

// Stop ends reading; a blocked Next returns.
func (h *History) Stop() { h.it.Stop() }

// PurgeHistory removes a run's history: the run has ended and its report
// is stored.
func (b *Bus) PurgeHistory(ctx context.Context, runID string) error {
	st, err := b.js.Stream(ctx, StreamHistory)
	if err == nil {
		err = st.Purge(ctx, jetstream.WithPurgeSubject(OutcomeSubject(runID)))
	}
	if err != nil {
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
	select {
	case <-p.f.Ok():
		return nil
	case err := <-p.f.Err():
		if noLeader(err) || errors.Is(err, nats.ErrTimeout) {
			// A cluster electing a leader: publish again, waiting, with
			// the no-leader retries (the message ID, if any, keeps one
			// copy).
			return p.b.publishData(ctx, p.subject, p.msgID, p.data, p.ctx)
		}
		return fmt.Errorf("bus: publish %s: %w", p.subject, err)
	case <-ctx.Done():
		return ctx.Err()
	}
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
	data, err := encode(t)
	if err != nil {
		return &Pending{err: err}
	}
	return b.publishAsync(ctx, TaskSubject(t.Pool), t.MsgID(), data)
}

// PublishOutcomeAsync publishes a task outcome without waiting.
func (b *Bus) PublishOutcomeAsync(ctx context.Context, o Outcome) *Pending {
	o.V = Version
	data, err := encode(o)
	if err != nil {
		return &Pending{err: err}
	}
	return b.publishAsync(ctx, OutcomeSubject(o.RunID), "", data)
}

// PublishEventAsync publishes a progress event without waiting for the
// stream: events are best effort (they hold no state), and events of one
// connection are stored in the order they were published.
func (b *Bus) PublishEventAsync(ctx context.Context, ev Event) *Pending {
	ev.V = Version
	if ev.Time.IsZero() {
		ev.Time = nowUTC()
	}
	root := ev.RootRunID
	if root == "" {
		root = ev.RunID
	}
	data, err := encode(ev)
	if err != nil {
		return &Pending{err: err}
	}
	return b.publishAsync(ctx, EventSubject(root, ev.RunID, ev.Kind), "", data)
}

// PutResultAsync stores a finished task's outcome record in the results
// bucket (see Results) without waiting.
func (b *Bus) PutResultAsync(ctx context.Context, key string, value []byte) *Pending {
	return b.publishAsync(ctx, "$KV."+BucketResults+"."+key, "", value)
}

func encode(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("bus: encode: %w", err)
	}
	return data, nil
}

func nowUTC() time.Time { return time.Now().UTC() }

package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
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
//
// It reads with an ephemeral, unacknowledged consumer (in memory, one
// replica) that it replaces itself, as an ordered consumer would, but with
// bounded waits: when heartbeats stop, when a delivery is missing, and when
// nothing arrived for historyStall while the stream holds facts past the
// last one read. A replacement that cannot be created (its node lost while
// the cluster elects leaders) is tried again every second under a new
// name, never waited on for longer than historyStall: a run's history is
// never left unread while the stream has facts for it.
type History struct {
	st      jetstream.Stream
	subject string
	last    uint64
	onStall func(read, newest uint64)

	mu      sync.Mutex
	c       jetstream.Consumer
	it      jetstream.MessagesContext
	read    uint64 // stream sequence of the last fact returned
	dseq    uint64 // consumer sequence of the last message of it
	stopped bool
	stop    chan struct{}
}

// historyStall is how long History waits on an idle consumer before it
// checks the stream for facts it has not been given.
const historyStall = 4 * time.Second

// OpenHistory opens the history of a run for reading from its first fact.
// Last is the sequence of the newest fact stored when it was opened (0 for
// none): a resuming reader has replayed the past once it has read it.
// onStall, when not nil, is told when the reader found facts its consumer
// did not deliver and reads them again on a new one.
func (b *Bus) OpenHistory(ctx context.Context, runID string, onStall func(read, newest uint64)) (*History, error) {
	subject := OutcomeSubject(runID)
	st, err := b.js.Stream(ctx, StreamHistory)
	if err != nil {
		return nil, fmt.Errorf("bus: history of %s: %w", runID, err)
	}
	h := &History{st: st, subject: subject, onStall: onStall, stop: make(chan struct{})}
	if h.last, err = h.newest(ctx); err != nil {
		return nil, fmt.Errorf("bus: history of %s: %w", runID, err)
	}
	if err := h.open(ctx); err != nil {
		return nil, fmt.Errorf("bus: history of %s: %w", runID, err)
	}
	return h, nil
}

// newest is the sequence of the newest fact of the history, 0 for none.
func (h *History) newest(ctx context.Context) (uint64, error) {
	m, err := h.st.GetLastMsgForSubject(ctx, h.subject)
	switch {
	case err == nil:
		return m.Sequence, nil
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	default:
		return 0, err
	}
}

// open starts reading the history after the last fact read, on a new
// consumer. The caller holds no lock.
func (h *History) open(ctx context.Context) error {
	h.mu.Lock()
	after := h.read
	h.mu.Unlock()
	cfg := jetstream.ConsumerConfig{
		FilterSubject:     h.subject,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		Replicas:          1,
		MemoryStorage:     true,
		InactiveThreshold: time.Minute,
	}
	if after > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = after + 1
	}
	c, err := h.st.CreateConsumer(ctx, cfg)
	if err != nil {
		return err
	}
	// Short heartbeats, reported: a consumer whose node is lost is
	// replaced within seconds.
	it, err := c.Messages(jetstream.PullMaxMessages(512), jetstream.PullExpiry(4*time.Second),
		jetstream.PullHeartbeat(time.Second), jetstream.WithMessagesErrOnMissingHeartbeat(true))
	if err != nil {
		h.drop(c)
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		it.Stop()
		h.drop(c)
		return jetstream.ErrMsgIteratorClosed
	}
	h.c, h.it, h.dseq = c, it, 0
	return nil
}

// drop deletes a consumer no longer read, without waiting (it also goes
// away by itself once inactive).
func (h *History) drop(c jetstream.Consumer) {
	name := c.CachedInfo().Name
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.st.DeleteConsumer(ctx, name)
	}()
}

// replace stops the consumer it (if still the current one) and reads on
// with a new one, trying every second until one is created or Stop is
// called.
func (h *History) replace(it jetstream.MessagesContext) error {
	h.mu.Lock()
	if h.it == it && it != nil {
		it.Stop()
		h.drop(h.c)
		h.it, h.c = nil, nil
	}
	h.mu.Unlock()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), historyStall)
		err := h.open(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return fmt.Errorf("bus: history: %w", err)
		}
		t := time.NewTimer(time.Second)
		select {
		case <-h.stop:
			t.Stop()
			return fmt.Errorf("bus: history: %w", jetstream.ErrMsgIteratorClosed)
		case <-t.C:
		}
	}
}

// Last is the sequence of the newest fact stored when the history was
// opened, 0 when there was none.
func (h *History) Last() uint64 { return h.last }

// Next blocks until the next fact is there. It returns an error once Stop
// was called or the connection closed.
func (h *History) Next() (HistoryEntry, error) {
	for {
		h.mu.Lock()
		it, stopped := h.it, h.stopped
		h.mu.Unlock()
		if stopped {
			return HistoryEntry{}, fmt.Errorf("bus: history: %w", jetstream.ErrMsgIteratorClosed)
		}
		if it == nil {
			if err := h.replace(nil); err != nil {
				return HistoryEntry{}, err
			}
			continue
		}
		msg, err := it.Next(jetstream.NextMaxWait(historyStall))
		switch {
		case errors.Is(err, nats.ErrTimeout):
			if err := h.check(it); err != nil {
				return HistoryEntry{}, err
			}
			continue
		case err != nil:
			h.mu.Lock()
			stopped = h.stopped
			h.mu.Unlock()
			if stopped || errors.Is(err, jetstream.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionClosed) {
				return HistoryEntry{}, fmt.Errorf("bus: history: %w", err)
			}
			// Heartbeats stopped or the consumer is gone: read on with a
			// new one.
			if err := h.replace(it); err != nil {
				return HistoryEntry{}, err
			}
			continue
		}
		md, err := msg.Metadata()
		if err != nil {
			continue // not a stream message
		}
		h.mu.Lock()
		if h.it != it {
			h.mu.Unlock()
			continue // from a consumer already replaced
		}
		gap := md.Sequence.Consumer != h.dseq+1
		if !gap {
			h.dseq = md.Sequence.Consumer
		}
		dup := md.Sequence.Stream <= h.read
		if !gap && !dup {
			h.read = md.Sequence.Stream
		}
		h.mu.Unlock()
		if gap {
			// A delivery went missing (unacknowledged consumers do not
			// send it again): read on after the last fact read.
			if err := h.replace(it); err != nil {
				return HistoryEntry{}, err
			}
			continue
		}
		if dup {
			continue
		}
		e := HistoryEntry{Seq: md.Sequence.Stream, Ctx: ExtractTrace(context.Background(), msg.Headers())}
		e.Err = Decode(msg.Data(), &e.Outcome)
		return e, nil
	}
}

// check looks for facts the idle consumer it did not deliver, and reads
// them on a new consumer when there are.
func (h *History) check(it jetstream.MessagesContext) error {
	ctx, cancel := context.WithTimeout(context.Background(), historyStall)
	newest, err := h.newest(ctx)
	cancel()
	if err != nil {
		return nil // the stream is not answering (electing a leader): look again later
	}
	h.mu.Lock()
	read := h.read
	h.mu.Unlock()
	if newest == 0 && read < h.last {
		// Facts that were there when the history was opened are gone:
		// the run ended and its history was purged.
		return fmt.Errorf("bus: history: %w", ErrHistoryGone)
	}
	if newest <= read {
		return nil
	}
	if h.onStall != nil {
		h.onStall(read, newest)
	}
	return h.replace(it)
}

// Stop ends reading; a blocked Next returns.
func (h *History) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	h.stopped = true
	close(h.stop)
	if h.it != nil {
		h.it.Stop()
		h.drop(h.c)
	}
}

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
	data, err := encode(t)
	if err != nil {
		return &Pending{err: err}
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
	data, err := encode(o)
	if err != nil {
		return &Pending{err: err}
	}
	return b.publishAsync(ctx, OutcomeSubject(o.RunID), "", data)
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
	data, err := encode(ev)
	return EventSubject(root, ev.RunID, ev.Kind), data, err
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

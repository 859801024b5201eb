package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// reader reads the messages of StreamHistory matching one filter, in the
// order the stream stored them, after a given sequence.
//
// It reads with an ephemeral, unacknowledged consumer (in memory, one
// replica) that it replaces itself, as an ordered consumer would, but with
// bounded waits: when heartbeats stop, when a delivery is missing, and when
// nothing arrived for historyStall while the stream holds messages of the
// filter past the last one read. A replacement that cannot be created (its
// node lost while the cluster elects leaders) is tried again every second
// under a new name, never waited on for longer than historyStall: the
// filter is never left unread while the stream has messages for it.
type reader struct {
	st     jetstream.Stream
	filter string
	// last is the newest message of the filter when reading began, for
	// telling a purged filter (ErrHistoryGone); 0 when not known.
	last    uint64
	onStall func(read, newest uint64)

	mu      sync.Mutex
	c       jetstream.Consumer
	it      jetstream.MessagesContext
	read    uint64 // stream sequence of the last message returned
	dseq    uint64 // consumer sequence of the last message of it
	stopped bool
	stop    chan struct{}
}

// historyStall is how long a reader waits on an idle consumer before it
// checks the stream for messages it has not been given.
const historyStall = 4 * time.Second

// newReader returns a reader of filter that starts after sequence after;
// open starts it.
func newReader(st jetstream.Stream, filter string, after uint64, onStall func(read, newest uint64)) *reader {
	return &reader{st: st, filter: filter, read: after, onStall: onStall, stop: make(chan struct{})}
}

// newestOf is the sequence of the newest message of subject (a filter
// with wildcards or not) in st, 0 for none.
func newestOf(ctx context.Context, st jetstream.Stream, subject string) (uint64, error) {
	m, err := st.GetLastMsgForSubject(ctx, subject)
	switch {
	case err == nil:
		return m.Sequence, nil
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	default:
		return 0, err
	}
}

// open starts reading after the last message read, on a new consumer.
// The caller holds no lock.
func (h *reader) open(ctx context.Context) error {
	h.mu.Lock()
	after := h.read
	h.mu.Unlock()
	cfg := jetstream.ConsumerConfig{
		FilterSubject:     h.filter,
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
func (h *reader) drop(c jetstream.Consumer) {
	name := c.CachedInfo().Name
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.st.DeleteConsumer(ctx, name)
	}()
}

// replace stops the consumer it (if still the current one) and reads on
// with a new one, trying every second until one is created or stop is
// called.
func (h *reader) replace(it jetstream.MessagesContext) error {
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

// next blocks until the next message is there and returns it with its
// stream sequence. It returns an error once Stop was called or the
// connection closed.
func (h *reader) next() (jetstream.Msg, uint64, error) {
	for {
		h.mu.Lock()
		it, stopped := h.it, h.stopped
		h.mu.Unlock()
		if stopped {
			return nil, 0, fmt.Errorf("bus: history: %w", jetstream.ErrMsgIteratorClosed)
		}
		if it == nil {
			if err := h.replace(nil); err != nil {
				return nil, 0, err
			}
			continue
		}
		msg, err := it.Next(jetstream.NextMaxWait(historyStall))
		switch {
		case errors.Is(err, nats.ErrTimeout):
			if err := h.check(it); err != nil {
				return nil, 0, err
			}
			continue
		case err != nil:
			h.mu.Lock()
			stopped = h.stopped
			h.mu.Unlock()
			if stopped || errors.Is(err, jetstream.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionClosed) {
				return nil, 0, fmt.Errorf("bus: history: %w", err)
			}
			// Heartbeats stopped or the consumer is gone: read on with a
			// new one.
			if err := h.replace(it); err != nil {
				return nil, 0, err
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
			// send it again): read on after the last message read.
			if err := h.replace(it); err != nil {
				return nil, 0, err
			}
			continue
		}
		if dup {
			continue
		}
		return msg, md.Sequence.Stream, nil
	}
}

// check looks for messages the idle consumer it did not deliver, and
// reads them on a new consumer when there are.
func (h *reader) check(it jetstream.MessagesContext) error {
	ctx, cancel := context.WithTimeout(context.Background(), historyStall)
	newest, err := newestOf(ctx, h.st, h.filter)
	cancel()
	if err != nil {
		return nil // the stream is not answering (electing a leader): look again later
	}
	h.mu.Lock()
	read := h.read
	h.mu.Unlock()
	if newest == 0 && read < h.last {
		// Messages that were there when reading began are gone: the run
		// ended and its history was purged.
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

// Stop ends reading; a blocked next returns.
func (h *reader) Stop() {
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

// entryOf decodes a history message.
func entryOf(msg jetstream.Msg, seq uint64) HistoryEntry {
	e := HistoryEntry{Seq: seq, Ctx: ExtractTrace(context.Background(), msg.Headers())}
	e.Err = decodeOutcome(msg.Data(), &e.Outcome)
	return e
}

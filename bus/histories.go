package bus

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Histories reads the histories of every run one process drives through a
// single consumer on StreamHistory (filter SubjectOutcomesAll) and hands
// each fact to the History of its run, so the consumers a coordinator
// holds do not grow with the runs it drives: one, plus at most
// MaxReplays short-lived ones while resumed runs read their past.
//
// A History opened for a run first reads the run's facts stored before it
// was opened (on a consumer of its own, deleted once it has them, and only
// when there are any), then the facts the shared consumer delivers after
// them, each once and in stream order.
type Histories struct {
	b       *Bus
	onStall func(read, newest uint64)
	replays chan struct{}

	mu      sync.Mutex
	st      jetstream.Stream
	rd      *reader
	subs    map[string]*History // by outcome subject
	err     error               // why the shared consumer stopped
	started bool
	done    chan struct{} // closed when the shared reading ends
}

// MaxReplays bounds the histories of one Histories that read their past
// at once (each on a consumer of its own); more wait in Open.
const MaxReplays = 8

// NewHistories returns the history reader of a process; Start starts it.
// onStall, when not nil, is told when a reader found facts its consumer
// did not deliver and reads them again on a new one.
func (b *Bus) NewHistories(onStall func(read, newest uint64)) *Histories {
	return &Histories{b: b, onStall: onStall, replays: make(chan struct{}, MaxReplays),
		subs: map[string]*History{}, done: make(chan struct{})}
}

// Start creates the shared consumer, delivering the facts stored from now
// on, and returns; they are read in the background until Stop.
func (hs *Histories) Start(ctx context.Context) error {
	st, err := hs.b.js.Stream(ctx, StreamHistory)
	if err != nil {
		return fmt.Errorf("bus: histories: %w", err)
	}
	// Facts stored before the consumer are read by each History's replay
	// (a History is opened after Start).
	rd := newReader(st, SubjectOutcomesAll, st.CachedInfo().State.LastSeq, hs.onStall)
	if err := rd.open(ctx); err != nil {
		return fmt.Errorf("bus: histories: %w", err)
	}
	hs.mu.Lock()
	hs.st, hs.rd, hs.started = st, rd, true
	hs.mu.Unlock()
	go hs.loop(rd)
	return nil
}

// loop hands every fact to the History of its run, if one is open.
func (hs *Histories) loop(rd *reader) {
	defer close(hs.done)
	var scratch []HistoryEntry
	for {
		msg, seq, err := rd.next()
		if err != nil {
			hs.mu.Lock()
			hs.err = err
			subs := make([]*History, 0, len(hs.subs))
			for _, h := range hs.subs {
				subs = append(subs, h)
			}
			hs.mu.Unlock()
			for _, h := range subs {
				h.poke()
			}
			return
		}
		hs.mu.Lock()
		h := hs.subs[msg.Subject()]
		hs.mu.Unlock()
		if h != nil {
			// Decoded here, off the run's own goroutine, into a slice
			// reused from message to message (push copies).
			scratch = appendEntries(scratch[:0], msg, seq)
			h.push(scratch)
			clear(scratch)
		}
	}
}

// Stop stops reading; every History's Next returns once its queue is
// empty. It blocks until the background reading ended; it is idempotent
// and safe when never started.
func (hs *Histories) Stop() {
	hs.mu.Lock()
	rd, started := hs.rd, hs.started
	hs.mu.Unlock()
	if !started {
		return
	}
	rd.Stop()
	<-hs.done
}

// Consumers is the number of consumers the reader holds on StreamHistory
// right now: the shared one and the replays in progress.
func (hs *Histories) Consumers() int { return 1 + len(hs.replays) }

// Open opens the history of a run, driven by this process, for reading
// from its first fact. It waits, within ctx, while MaxReplays other
// histories read their past. A run's history is open at most once at a
// time.
func (hs *Histories) Open(ctx context.Context, runID string) (*History, error) {
	subject := OutcomeSubject(runID)
	h := &History{hs: hs, subject: subject, wake: make(chan struct{}, 1)}
	hs.mu.Lock()
	switch {
	case !hs.started:
		hs.mu.Unlock()
		return nil, fmt.Errorf("bus: history of %s: reader not started", runID)
	case hs.subs[subject] != nil:
		hs.mu.Unlock()
		return nil, fmt.Errorf("bus: history of %s: already open", runID)
	}
	hs.subs[subject] = h
	st := hs.st
	hs.mu.Unlock()
	fail := func(err error) (*History, error) {
		h.Stop()
		return nil, fmt.Errorf("bus: history of %s: %w", runID, err)
	}
	// Open before this look-up: every fact after the newest seen here is
	// delivered by the shared consumer.
	last, err := newestOf(ctx, st, subject)
	if err != nil {
		return fail(err)
	}
	h.last = last
	if last == 0 {
		return h, nil
	}
	select {
	case hs.replays <- struct{}{}:
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	rp := newReader(st, subject, 0, hs.onStall)
	rp.last = last
	h.mu.Lock()
	h.replay, h.release = rp, sync.OnceFunc(func() { <-hs.replays })
	h.mu.Unlock()
	if err := rp.open(ctx); err != nil {
		return fail(err)
	}
	done := make(chan struct{})
	h.mu.Lock()
	h.pastDone = done
	h.mu.Unlock()
	go func() {
		defer close(done)
		h.readPast(rp)
	}()
	return h, nil
}

// History is one run's history: the facts that move it on (see
// HistoryEntry), read in order from the first. Its reader waits on Ready
// and takes what is there with TryNext (or blocks in Next); the facts are
// decoded before they are handed out, on the goroutine that read them.
type History struct {
	hs      *Histories
	subject string
	last    uint64

	mu      sync.Mutex
	replay  *reader        // reading the past; nil once caught up
	release func()         // frees the replay's slot
	past    []HistoryEntry // read by the replay, not handed out yet
	pastErr error          // why the replay stopped before catching up
	// pastDone is closed when readPast returned (nil: not started).
	pastDone chan struct{}
	// skipTo is the sequence of the last message the replay handed out:
	// the shared consumer's copies of it and of earlier ones are dropped.
	skipTo  uint64
	queue   []HistoryEntry // delivered by the shared consumer
	qhead   int            // queue[qhead:] are still to be read
	stopped bool
	wake    chan struct{}
}

// Last is the sequence of the newest fact stored when the history was
// opened, 0 when there was none: a resuming reader has replayed the past
// once it has read it.
func (h *History) Last() uint64 { return h.last }

// push queues the entries of one message the shared consumer delivered.
func (h *History) push(es []HistoryEntry) {
	h.mu.Lock()
	h.queue = append(h.queue, es...)
	h.mu.Unlock()
	h.poke()
}

func (h *History) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// readPast reads the run's facts stored before the history was opened,
// up to the newest of them, into h.past.
func (h *History) readPast(rp *reader) {
	for {
		msg, seq, err := rp.next()
		h.mu.Lock()
		if err != nil {
			if h.replay == rp {
				h.pastErr = err
			}
			h.mu.Unlock()
			h.poke()
			return
		}
		h.past = append(h.past, entriesOf(msg, seq)...)
		h.mu.Unlock()
		h.poke()
		if seq >= h.last {
			return
		}
	}
}

// Ready is told (a token, never closed) when entries may be there for
// TryNext: after each token, call TryNext until it has nothing.
func (h *History) Ready() <-chan struct{} { return h.wake }

// TryNext returns the next entry if it is there (ok), without waiting. It
// returns an error once Stop was called, the shared reading stopped, or
// the history was removed while its past was read (ErrHistoryGone).
func (h *History) TryNext() (e HistoryEntry, ok bool, err error) {
	h.mu.Lock()
	if rp := h.replay; rp != nil {
		if len(h.past) == 0 {
			err := h.pastErr
			if h.stopped {
				err = fmt.Errorf("bus: history: %w", jetstream.ErrMsgIteratorClosed)
			}
			h.mu.Unlock()
			return HistoryEntry{}, false, err
		}
		e = h.past[0]
		h.past[0] = HistoryEntry{}
		h.past = h.past[1:]
		h.skipTo = e.Seq
		caughtUp := e.Seq >= h.last && e.Rest == 0
		release := h.release
		if caughtUp {
			h.replay, h.past = nil, nil
		}
		h.mu.Unlock()
		if caughtUp {
			rp.Stop()
			release()
		}
		return e, true, nil
	}
	for h.qhead < len(h.queue) {
		e = h.queue[h.qhead]
		h.queue[h.qhead] = HistoryEntry{}
		h.qhead++
		if e.Seq <= h.skipTo {
			continue // read in the replay already
		}
		h.mu.Unlock()
		return e, true, nil
	}
	// Drained: the queue's array is filled again from its start (a new
	// one per message was 0.7 MB of a converged 2,000-file apply).
	h.queue, h.qhead = h.queue[:0], 0
	stopped := h.stopped
	h.mu.Unlock()
	if stopped {
		return HistoryEntry{}, false, fmt.Errorf("bus: history: %w", jetstream.ErrMsgIteratorClosed)
	}
	h.hs.mu.Lock()
	err = h.hs.err
	h.hs.mu.Unlock()
	return HistoryEntry{}, false, err
}

// Next blocks until the next entry is there. It returns the errors of
// TryNext.
func (h *History) Next() (HistoryEntry, error) {
	for {
		e, ok, err := h.TryNext()
		if ok || err != nil {
			return e, err
		}
		<-h.wake
	}
}

// Stop ends reading; a blocked Next returns.
func (h *History) Stop() {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.stopped = true
	rp, release, done := h.replay, h.release, h.pastDone
	h.replay = nil
	h.mu.Unlock()
	if rp != nil {
		rp.Stop()
	}
	if done != nil {
		<-done // the past's reader, stopped (or returned by itself)
	}
	if release != nil {
		release()
	}
	h.hs.mu.Lock()
	if h.hs.subs[h.subject] == h {
		delete(h.hs.subs, h.subject)
	}
	h.hs.mu.Unlock()
	h.poke()
}

// ReadHistory calls fn with every fact of a run's history stored when it
// is called, in order, on a consumer it deletes when done. It returns
// ErrHistoryGone when the history was removed while it was read (the run
// ended), ctx's error when ctx ends first.
func (b *Bus) ReadHistory(ctx context.Context, runID string, fn func(HistoryEntry)) error {
	subject := OutcomeSubject(runID)
	st, err := b.js.Stream(ctx, StreamHistory)
	if err != nil {
		return fmt.Errorf("bus: history of %s: %w", runID, err)
	}
	last, err := newestOf(ctx, st, subject)
	if err != nil || last == 0 {
		return wrapHistory(runID, err)
	}
	rd := newReader(st, subject, 0, nil)
	rd.last = last
	if err := rd.open(ctx); err != nil {
		return wrapHistory(runID, err)
	}
	defer rd.Stop()
	stop := context.AfterFunc(ctx, rd.Stop)
	defer stop()
	for {
		msg, seq, err := rd.next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return wrapHistory(runID, err)
		}
		for _, e := range entriesOf(msg, seq) {
			fn(e)
		}
		if seq >= last {
			return nil
		}
	}
}

func wrapHistory(runID string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("bus: history of %s: %w", runID, err)
}

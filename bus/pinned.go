package bus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// pinnedIdlePoll is how often an idle worker looks for pinned tasks
// without being woken (a wake lost while its connection was down).
const pinnedIdlePoll = 2 * time.Minute

// pinnedWakeWindow is how long after a wake a worker keeps reading for the
// task that woke it.
const pinnedWakeWindow = 30 * time.Second

// PinnedTasks hands out the tasks of a worker's own pool (runs pinned to
// it: fleet fan-outs, assignments) without a JetStream consumer. The
// worker subscribes to its pool's subject in core NATS, which wakes it
// when a coordinator publishes a task there, reads the task from the
// tasks stream by subject (the first message of its subject past the
// ones it holds) and deletes it from the stream when it acks. A fleet of
// N workers then costs the server N subscriptions instead of N durable
// consumers (NATS allows 1,000 per stream by default, and each has its
// own stored state and pull loop).
//
// Delivery semantics match a consumer's for the one worker that reads
// the pool: a task stays in the stream until acked or termed; Nak hands
// it out again after its delay; a worker that restarts reads what its
// predecessor left (with Attempt 2, so results recorded by an earlier
// delivery are looked up); after the bus's TaskMaxDeliver deliveries by
// one process a task is dropped. There is no ack deadline: a task held
// by a live worker is not redelivered (InProgress is a no-op). Two
// processes must not share a worker name (each would run every task).
type PinnedTasks struct {
	b          *Bus
	streamName string
	subject    string
	idlePoll   time.Duration // reads without a wake, on average

	// Set by the first Next that finds the stream (owned by the Next
	// holding turn until then).
	stream jetstream.Stream
	before uint64 // last sequence of the stream when found

	turn chan struct{} // held by the Next in progress

	// Owned by the Next holding turn.
	sub    *nats.Subscription
	wake   chan *nats.Msg
	status chan nats.Status
	// Whether a read is owed (see owed): emptied is set when a read found
	// nothing while subscribed (cleared on subscribing, reconnecting, a
	// wake dropped); unread holds the message IDs of the wakes heard since
	// whose task no read has found yet, with when each was heard.
	// seen holds the IDs of the tasks found lately, so that a wake heard
	// after its task was found (or a copy of it published again) is not
	// owed.
	emptied bool
	unread  map[string]time.Time
	seen    map[string]time.Time
	dropped int // the subscription's dropped messages when last looked
	// confirmed says the server is known to hold the wake subscription
	// (subscribe's flush came back): until then a task published after
	// a read wakes nobody, so the reader flushes again before it waits
	// long, and reads once more when the flush comes back.
	confirmed bool

	// Every task of the pool below cursor has been handed out: it is
	// settled, held, or nak'd and then in again.
	mu      sync.Mutex
	cursor  uint64              // next sequence to look from
	handed  map[uint64]int      // deliveries by this process of unsettled tasks
	naked   map[uint64]struct{} // nak'd tasks due again (delay passed)
	renudge chan struct{}       // a nak'd task is due again
}

// due returns (and forgets) the lowest nak'd task due again, or 0. The
// caller holds mu.
func (p *PinnedTasks) due() uint64 {
	var low uint64
	for seq := range p.naked {
		if low == 0 || seq < low {
			low = seq
		}
	}
	delete(p.naked, low)
	return low
}

// PinnedTasks returns the reader of the named worker's own pool: its
// tasks on PinnedSubject(worker) in StreamPinned. It looks the stream up
// (tasks stored before are handed out as possible redeliveries, Attempt
// 2); while the stream is not provisioned (a server set up by an earlier
// version, until a coordinator of this one opens the bus) Next waits for
// it.
func (b *Bus) PinnedTasks(ctx context.Context, worker string) (*PinnedTasks, error) {
	if err := ValidToken(PinnedPool(worker)); err != nil {
		return nil, fmt.Errorf("bus: worker name: %w", err)
	}
	p := b.pinnedTasks(StreamPinned, PinnedSubject(worker))
	s, err := b.js.Stream(ctx, StreamPinned)
	switch {
	case err == nil:
		p.stream, p.before = s, s.CachedInfo().State.LastSeq
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("bus: pinned tasks of %s: %w", worker, err)
	}
	return p, nil
}

// LegacyPinnedTasks returns the reader of the tasks pinned to the named
// worker where earlier versions put them: LegacyTaskSubject of its pool
// in StreamTasks. Coordinators of earlier versions publish there, and
// tasks queued before an upgrade wait there; a worker reads both, so
// that workers can be upgraded before coordinators (docs/bus.md). It
// makes no request: the first Next looks the stream up (tasks stored
// before then are handed out with Attempt 2), and it reads without a wake
// every legacyIdlePoll only.
func (b *Bus) LegacyPinnedTasks(_ context.Context, worker string) (*PinnedTasks, error) {
	pool := PinnedPool(worker)
	if err := ValidToken(pool); err != nil {
		return nil, fmt.Errorf("bus: worker name: %w", err)
	}
	p := b.pinnedTasks(StreamTasks, LegacyTaskSubject(pool))
	p.idlePoll = legacyIdlePoll
	return p, nil
}

// legacyIdlePoll is how often an idle LegacyPinnedTasks reads without
// being woken: only coordinators of earlier versions publish there.
const legacyIdlePoll = 30 * time.Minute

func (b *Bus) pinnedTasks(stream, subject string) *PinnedTasks {
	return &PinnedTasks{b: b, streamName: stream, subject: subject, idlePoll: pinnedIdlePoll,
		turn: make(chan struct{}, 1), cursor: 1, handed: map[uint64]int{}, naked: map[uint64]struct{}{}, renudge: make(chan struct{}, 1)}
}

// read reads the task at again (a nak'd one), or the first of the pool
// from from; ErrMsgNotFound when there is none, or no stream yet.
func (p *PinnedTasks) read(ctx context.Context, from, again uint64) (*jetstream.RawStreamMsg, error) {
	if p.stream == nil {
		s, err := p.b.js.Stream(ctx, p.streamName)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, jetstream.ErrMsgNotFound
		} else if err != nil {
			return nil, err
		}
		p.stream, p.before = s, s.CachedInfo().State.LastSeq
	}
	if again != 0 {
		return p.stream.GetMsg(ctx, again)
	}
	return p.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(p.subject))
}

// Next blocks until a task of the pool is there or ctx ends (then it
// returns ctx's error and drops its subscription until the next call).
func (p *PinnedTasks) Next(ctx context.Context) (*Delivery, error) {
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-p.turn }()
	if p.sub == nil {
		if err := p.subscribe(); err != nil {
			return nil, err
		}
	}
	burst := 0 // reads since a wake that found nothing
	var woken time.Time
	failed := 0
	for {
		if err := ctx.Err(); err != nil {
			p.unsubscribe()
			return nil, err
		}
		p.mu.Lock()
		from, again := p.cursor, p.due()
		p.mu.Unlock()
		var msg *jetstream.RawStreamMsg
		err := errNothingOwed
		if again != 0 || p.owed() {
			msg, err = p.read(ctx, from, again)
		}
		switch {
		case err == nil:
			if again == 0 {
				p.found(msg.Header.Get(jetstream.MsgIDHeader))
			}
			if d := p.hand(msg, again != 0); d != nil {
				return d, nil
			}
			continue
		case errors.Is(err, jetstream.ErrMsgNotFound) && again != 0:
			continue // settled meanwhile
		case errors.Is(err, errNothingOwed):
			// Every task announced since the subject was read to its end
			// has been handed out: wait for the next wake.
			failed, burst = 0, 0
		case errors.Is(err, jetstream.ErrMsgNotFound):
			failed = 0
			p.readToEnd()
		case errors.Is(err, nats.ErrConnectionClosed):
			p.unsubscribe()
			return nil, fmt.Errorf("bus: pinned tasks: %w", err)
		default:
			if ctx.Err() != nil {
				continue
			}
			// Transient (reconnecting, leader election): read again soon.
			failed++
			if err := sleepCtx(ctx, refusedBackoff(failed)); err != nil {
				p.unsubscribe()
				return nil, err
			}
			continue
		}
		// Nothing past the cursor. The server may not have held the
		// wake subscription at that read (subscribe's flush timed out on
		// a loaded server: TestPinnedTasksFleet's host-0023 then waited
		// for the idle poll): flush again, and read once more when the
		// server answers, before waiting for a wake.
		if !p.confirmed {
			fctx, cancel := context.WithTimeout(ctx, pinnedFlushTimeout)
			err := p.b.nc.FlushWithContext(fctx)
			cancel()
			if err == nil {
				p.confirmed, p.emptied = true, false
				continue
			}
		}
		// A wake can come before the stream has stored its message
		// (seconds before, on a loaded server): read again, 2 ms
		// doubling to 1 s, for pinnedWakeWindow after the wake; then
		// wait.
		wait := p.idlePoll/2 + time.Duration(rand.Int64N(int64(p.idlePoll)))
		if burst > 0 && time.Now().Before(woken.Add(pinnedWakeWindow)) {
			wait = min(time.Millisecond<<min(burst, 10), time.Second)
			burst++
		} else {
			burst = 0
		}
		if !p.confirmed {
			// (the flush failed: disconnected, or the server slower
			// still) not long before flushing again
			wait = min(wait, pinnedFlushTimeout)
		}
		t := time.NewTimer(wait)
		select {
		case m := <-p.wake:
			p.heard(m)
			p.drainWakes()
			burst, woken = 1, time.Now()
		case <-p.status:
			// Wakes published while disconnected were not heard.
			p.emptied = false
			burst, woken = 1, time.Now()
		case <-p.renudge:
		case <-t.C:
			p.emptied = false // the idle poll reads
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// errNothingOwed stands for a read not made: nothing was announced that
// was not read (owed).
var errNothingOwed = errors.New("bus: no pinned task announced")

// owed reports whether the reader must read the subject: unless it read
// it to its end since subscribing (and since the connection was last
// re-established) and has since found the task of every wake heard, a
// task may wait unread. A wake is the task's own publication heard on
// the subject, so a reader that has handed out the task it was woken for
// need not read again to learn that nothing followed: the next task's
// publication wakes it (before, every task cost a second read that found
// nothing). A wake dropped by a full channel (the subscription's
// dropped count) makes it read. Must be called holding turn.
func (p *PinnedTasks) owed() bool {
	if p.sub != nil {
		if n, err := p.sub.Dropped(); err == nil && n != p.dropped {
			p.dropped, p.emptied = n, false
		}
	}
	return !p.emptied || len(p.unread) > 0
}

// heard notes a wake: its task is owed until a read finds it.
func (p *PinnedTasks) heard(m *nats.Msg) {
	id := m.Header.Get(jetstream.MsgIDHeader)
	if id == "" {
		p.emptied = false // not matched by a read: read to the end again
		return
	}
	if _, ok := p.seen[id]; ok {
		return
	}
	if p.unread == nil {
		p.unread = map[string]time.Time{}
	}
	p.unread[id] = time.Now()
}

// pinnedSeenPrune is how many found task IDs are kept before those older
// than pinnedWakeWindow are forgotten.
const pinnedSeenPrune = 1024

// found notes a task a read found: its wake, heard or to come, is not
// owed.
func (p *PinnedTasks) found(id string) {
	if id == "" {
		return
	}
	delete(p.unread, id)
	if p.seen == nil {
		p.seen = map[string]time.Time{}
	}
	if len(p.seen) >= pinnedSeenPrune {
		forgetOlder(p.seen, pinnedWakeWindow)
	}
	p.seen[id] = time.Now()
}

// forgetOlder deletes the entries of m noted more than d ago.
func forgetOlder(m map[string]time.Time, d time.Duration) {
	for id, at := range m {
		if time.Since(at) > d {
			delete(m, id)
		}
	}
}

// readToEnd notes a read that found nothing past the cursor. A wake not
// matched for longer than pinnedWakeWindow was of a task that is not to
// be stored (a copy the stream's duplicate window dropped) or is gone
// (deleted, purged): it is forgotten.
func (p *PinnedTasks) readToEnd() {
	p.emptied = true
	forgetOlder(p.unread, pinnedWakeWindow)
	forgetOlder(p.seen, pinnedWakeWindow)
}

// hand turns a message read from the stream into a Delivery, or returns
// nil after dropping one delivered TaskMaxDeliver times already.
func (p *PinnedTasks) hand(msg *jetstream.RawStreamMsg, again bool) *Delivery {
	p.mu.Lock()
	if !again {
		p.cursor = msg.Sequence + 1
	}
	n := p.handed[msg.Sequence]
	if n == 0 && msg.Sequence <= p.before {
		n = 1 // there before this process: an earlier one may have had it
	}
	n++
	p.handed[msg.Sequence] = n
	p.mu.Unlock()
	m := &pinnedMsg{p: p, msg: msg}
	if n > p.b.cfg.TaskMaxDeliver {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.settle(ctx)
		return nil
	}
	return &Delivery{m: m, Attempt: n, Ctx: ExtractTrace(context.Background(), msg.Header)}
}

// subscribe subscribes to the wakes and waits until the server has the
// subscription: a task published between the first read and a
// subscription the server did not know yet would wake nobody, and wait
// for the idle poll.
func (p *PinnedTasks) subscribe() error {
	p.wake = make(chan *nats.Msg, 16)
	sub, err := p.b.nc.ChanSubscribe(p.subject, p.wake)
	if err != nil {
		return fmt.Errorf("bus: pinned tasks: %w", err)
	}
	p.sub = sub
	p.emptied, p.unread, p.seen, p.dropped = false, nil, nil, 0
	p.status = p.b.nc.StatusChanged(nats.CONNECTED)
	// A flush that fails (disconnected, a slow server) is not an error:
	// Next flushes again before it waits long (confirmed), and the
	// reconnect's status covers a disconnection.
	p.confirmed = p.b.nc.FlushTimeout(pinnedFlushTimeout) == nil
	return nil
}

// pinnedFlushTimeout bounds subscribe's wait for the server.
const pinnedFlushTimeout = 5 * time.Second

func (p *PinnedTasks) unsubscribe() {
	if p.sub == nil {
		return
	}
	_ = p.sub.Unsubscribe()
	p.b.nc.RemoveStatusListener(p.status)
	p.sub, p.wake, p.status = nil, nil, nil
}

func (p *PinnedTasks) drainWakes() {
	for {
		select {
		case m := <-p.wake:
			p.heard(m)
		default:
			return
		}
	}
}

// pinnedMsg is a pinned task read from the stream: acking deletes it.
type pinnedMsg struct {
	p   *PinnedTasks
	msg *jetstream.RawStreamMsg
}

func (m *pinnedMsg) Data() []byte      { return m.msg.Data }
func (m *pinnedMsg) Subject() string   { return m.msg.Subject }
func (m *pinnedMsg) inProgress() error { return nil }

func (m *pinnedMsg) ack(ctx context.Context) error { return m.settle(ctx) }

func (m *pinnedMsg) term(string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return m.settle(ctx)
}

// settle deletes the task from the stream (the work queue's ack).
func (m *pinnedMsg) settle(ctx context.Context) error {
	err := m.p.stream.DeleteMsg(ctx, m.msg.Sequence)
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		return err
	}
	m.p.mu.Lock()
	delete(m.p.handed, m.msg.Sequence)
	m.p.mu.Unlock()
	return nil
}

// nak hands the task out again after delay.
func (m *pinnedMsg) nak(delay time.Duration) error {
	again := func() {
		m.p.mu.Lock()
		if _, held := m.p.handed[m.msg.Sequence]; held {
			m.p.naked[m.msg.Sequence] = struct{}{}
		}
		m.p.mu.Unlock()
		select {
		case m.p.renudge <- struct{}{}:
		default:
		}
	}
	if delay <= 0 {
		again()
	} else {
		time.AfterFunc(delay, again)
	}
	return nil
}

package bus

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Outcome batches.
//
// A worker executing a segment task answers each resource with an
// outcome. Published one message each, a converged segment of 256 files
// cost 256 stored messages, acknowledgements and deliveries to the
// coordinator, more than the checks themselves. A coordinator that reads
// batches says so in the task (Task.BatchOutcomes); the worker then
// gathers the segment's outcomes in an OutcomeBatch and publishes them as
// one message of kind FactBatch on the run's outcome subject:
//
//	{"v": 1, "kind": "batch", "run_id": "…", "outcomes": [{outcome}, {outcome}, …]}
//
// Each outcome keeps its own MAC, made with its own task attempt's token
// (SignOutcome): the batch itself is not signed, and a coordinator checks
// each of its outcomes as it checks a single one, so a worker can no more
// forge another task's outcome inside a batch than outside one. History
// readers (History.Next, ReadHistory) hand out a batch's outcomes as
// entries of their own, in order (HistoryEntry.Rest).
//
// A batch is published when its segment ends (OutcomeBatch.Close), when
// it holds MaxBatchOutcomes outcomes (OutcomeBatchOpts.Size, if fewer) or
// would grow past MaxBatchBytes, and BatchFlushAfter after its first
// outcome, so that a long resource
// does not hold back the outcomes of those before it. A batch of one
// outcome is published as that outcome alone, the message every
// coordinator reads.

// Bounds of an outcome batch.
const (
	// MaxBatchOutcomes is the most outcomes one batch message carries
	// (a segment of more resources is answered in several).
	// A reader refuses a batch of more, with an error naming the count.
	MaxBatchOutcomes = 256
	// MaxBatchBytes bounds a batch message's encoded size (less when the
	// server's maximum payload, less 16 KiB, is smaller). An outcome that
	// would take a batch past it goes into the next one; an outcome
	// larger than it alone is published alone.
	MaxBatchBytes = 256 << 10
	// BatchFlushAfter is how long a batch's first outcome waits for the
	// others before the batch is published anyway.
	BatchFlushAfter = 20 * time.Millisecond
)

// OutcomeBatch gathers the outcomes of one run's segment task into batch
// messages (see FactBatch). Add and Close are called from one goroutine;
// a timer publishes a batch BatchFlushAfter after its first outcome.
type OutcomeBatch struct {
	b        *Bus
	ctx      context.Context
	subject  string
	head     []byte // the batch message up to its first outcome
	maxBytes int
	flushAft time.Duration
	size     int // outcomes per batch message at most

	mu      sync.Mutex
	enc     []byte // an outcome's encoding, reused
	buf     []byte // head, then the outcomes separated by commas
	n       int    // outcomes in buf
	single  int    // where the first outcome starts in buf
	timer   *time.Timer
	gen     uint64 // batches published, for telling a stale timer
	pending []*Pending
	closed  bool
}

// OutcomeBatchOpts tune an OutcomeBatch.
type OutcomeBatchOpts struct {
	// FlushAfter is how long a batch's first outcome waits before the
	// batch is published. Zero means BatchFlushAfter; negative, never
	// (only the bounds and Close publish).
	FlushAfter time.Duration
	// Size is the most outcomes one batch message carries: up to
	// MaxBatchOutcomes, which zero means. A worker answering a segment's
	// members as it checks them publishes every Size outcomes, so the
	// coordinator folds the first while the worker checks the next.
	Size int
}

// NewOutcomeBatch returns a batch of outcomes of run runID, published
// with the trace context of ctx.
func (b *Bus) NewOutcomeBatch(ctx context.Context, runID string, opts OutcomeBatchOpts) *OutcomeBatch {
	run, _ := json.Marshal(runID)
	head := append([]byte(`{"v":`+strconv.Itoa(Version)+`,"kind":"`+string(FactBatch)+`","run_id":`), run...)
	head = append(head, `,"outcomes":[`...)
	size := MaxBatchOutcomes
	if opts.Size > 0 && opts.Size < MaxBatchOutcomes {
		size = opts.Size
	}
	return &OutcomeBatch{b: b, ctx: ctx, subject: OutcomeSubject(runID), head: head,
		maxBytes: min(MaxBatchBytes, b.inlineMax()), flushAft: cmp.Or(opts.FlushAfter, BatchFlushAfter), size: size}
}

// Add puts an outcome, signed already, into the batch; the batch is
// published first when o would take it past its bounds.
func (ob *OutcomeBatch) Add(o Outcome) {
	o.V = Version
	ob.mu.Lock()
	defer ob.mu.Unlock()
	// Encoded into the batch's own scratch buffer: encode(o) put the
	// outcome in an interface and its encoding in a buffer of its own,
	// two allocations per resource.
	ob.enc = o.appendJSON(ob.enc[:0])
	data := ob.enc
	if ob.n > 0 && (ob.n >= ob.size || len(ob.buf)+1+len(data)+2 > ob.maxBytes) {
		ob.flushLocked()
	}
	if len(ob.head)+len(data)+2 > ob.maxBytes {
		// Too large for any batch: alone, as a single outcome, in order.
		ob.pending = append(ob.pending, ob.b.publishAsync(ob.ctx, ob.subject, "", append([]byte(nil), data...)))
		return
	}
	if ob.n == 0 {
		ob.buf = append(ob.buf[:0], ob.head...)
		ob.single = len(ob.buf)
		gen := ob.gen
		if ob.flushAft > 0 {
			ob.timer = time.AfterFunc(ob.flushAft, func() { ob.flushAfter(gen) })
		}
	} else {
		ob.buf = append(ob.buf, ',')
	}
	ob.buf = append(ob.buf, data...)
	ob.n++
}

// flushAfter publishes the batch of generation gen if it is still the
// one gathering.
func (ob *OutcomeBatch) flushAfter(gen uint64) {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if !ob.closed && ob.gen == gen {
		ob.flushLocked()
	}
}

// Flush publishes the outcomes gathered so far, without waiting.
func (ob *OutcomeBatch) Flush() {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.flushLocked()
}

func (ob *OutcomeBatch) flushLocked() {
	if ob.n == 0 {
		return
	}
	if ob.timer != nil {
		ob.timer.Stop()
		ob.timer = nil
	}
	var data []byte
	if ob.n == 1 {
		data = append([]byte(nil), ob.buf[ob.single:]...) // the outcome alone
	} else {
		data = append(append([]byte(nil), ob.buf...), ']', '}')
	}
	ob.pending = append(ob.pending, ob.b.publishAsync(ob.ctx, ob.subject, "", data))
	ob.n = 0
	ob.gen++
}

// Close publishes what is gathered and returns every publication made,
// to be waited for (Pending.Wait) before the task is acknowledged. The
// batch takes no outcome after.
func (ob *OutcomeBatch) Close() []*Pending {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.flushLocked()
	ob.closed = true
	ps := ob.pending
	ob.pending = nil
	return ps
}

// entriesOf decodes a history message into its entries: one for a fact,
// one per outcome for a batch.
func entriesOf(msg jetstream.Msg, seq uint64) []HistoryEntry {
	return appendEntries(nil, msg, seq)
}

// appendEntries is entriesOf appending to dst (the history reader's
// reused slice: a slice per batch message was 0.6 MB of a converged
// 2,000-file apply).
func appendEntries(dst []HistoryEntry, msg jetstream.Msg, seq uint64) []HistoryEntry {
	e := entryOf(msg, seq)
	if e.Err != nil || e.Outcome.Kind != FactBatch {
		return append(dst, e)
	}
	return appendBatch(dst, e)
}

// appendBatch appends the entries of a decoded batch message's outcomes.
// A batch of more than MaxBatchOutcomes outcomes, or one holding another
// batch, is one entry with an error.
func appendBatch(dst []HistoryEntry, e HistoryEntry) []HistoryEntry {
	items := e.Outcome.Outcomes
	switch {
	case len(items) > MaxBatchOutcomes:
		e.Err = fmt.Errorf("bus: outcome batch of %d outcomes: more than %d", len(items), MaxBatchOutcomes)
		return append(dst, e)
	case len(items) == 0:
		e.Err = fmt.Errorf("bus: outcome batch with no outcomes")
		return append(dst, e)
	}
	for i, o := range items {
		out := HistoryEntry{Seq: e.Seq, Rest: len(items) - 1 - i, Outcome: o, Ctx: e.Ctx}
		if o.Kind == FactBatch || len(o.Outcomes) > 0 {
			out.Outcome = Outcome{}
			out.Err = fmt.Errorf("bus: outcome batch: outcome %d holds outcomes of its own", i)
		}
		dst = append(dst, out)
	}
	return dst
}

package bus_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// signedOutcome is outcome k of run, signed with its task's token.
func signedOutcome(secret []byte, run string, k int, message string) bus.Outcome {
	o := bus.Outcome{RunID: run, Task: k, Attempt: 1, Ref: fmt.Sprintf("file#/f%d", k), Status: bus.TaskStable,
		Message: message, Worker: "w1", Delivery: 1}
	bus.SignOutcome(&o, bus.TaskToken(secret, run, k, 1))
	return o
}

// noTimer: only the bounds and Close publish.
var noTimer = bus.OutcomeBatchOpts{FlushAfter: -1}

// history reads run's whole history.
func history(t *testing.T, b *bus.Bus, run string) []bus.HistoryEntry {
	t.Helper()
	var es []bus.HistoryEntry
	require.NoError(t, b.ReadHistory(ctxT(t), run, func(e bus.HistoryEntry) { es = append(es, e) }))
	return es
}

// waitAll waits for every publication.
func waitAll(t *testing.T, ps []*bus.Pending) {
	t.Helper()
	for _, p := range ps {
		require.NoError(t, p.Wait(ctxT(t)))
	}
}

// messages counts the distinct messages entries came from.
func messages(es []bus.HistoryEntry) int {
	seqs := map[uint64]bool{}
	for _, e := range es {
		seqs[e.Seq] = true
	}
	return len(seqs)
}

func TestOutcomeBatchIsOneMessageOfVerifiableOutcomes(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	secret, err := bus.NewRunSecret()
	require.NoError(t, err)
	ob := b.NewOutcomeBatch(ctxT(t), "r1", noTimer)
	for k := range bus.MaxBatchOutcomes {
		ob.Add(signedOutcome(secret, "r1", k, "ok"))
	}
	ps := ob.Close()
	require.Len(t, ps, 1, "a segment of %d outcomes is one message", bus.MaxBatchOutcomes)
	waitAll(t, ps)

	es := history(t, b, "r1")
	require.Len(t, es, bus.MaxBatchOutcomes)
	require.Equal(t, 1, messages(es))
	for k, e := range es {
		require.NoError(t, e.Err)
		require.Equal(t, k, e.Outcome.Task, "in the order they were added")
		require.Equal(t, bus.MaxBatchOutcomes-1-k, e.Rest)
		require.Equal(t, bus.FactOutcome, e.Outcome.Kind)
		require.True(t, bus.VerifyOutcome(e.Outcome, bus.TaskToken(secret, "r1", k, 1)), "outcome %d keeps its own MAC", k)
		require.False(t, bus.VerifyOutcome(e.Outcome, bus.TaskToken(secret, "r1", (k+1)%bus.MaxBatchOutcomes, 1)),
			"outcome %d verifies with its own task's token only", k)
	}
}

func TestOutcomeBatchCountBound(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	secret, err := bus.NewRunSecret()
	require.NoError(t, err)
	ob := b.NewOutcomeBatch(ctxT(t), "r1", noTimer)
	for k := range bus.MaxBatchOutcomes + 1 {
		ob.Add(signedOutcome(secret, "r1", k, "ok"))
	}
	waitAll(t, ob.Close())
	es := history(t, b, "r1")
	require.Len(t, es, bus.MaxBatchOutcomes+1)
	require.Equal(t, 2, messages(es), "one past the bound starts a second message")
	require.Equal(t, es[0].Seq, es[bus.MaxBatchOutcomes-1].Seq)
	last := es[bus.MaxBatchOutcomes]
	require.NotEqual(t, es[0].Seq, last.Seq)
	require.Equal(t, bus.MaxBatchOutcomes, last.Outcome.Task)
	require.Zero(t, last.Rest)
}

// batchSize is the encoded size of a batch message of outs.
func batchSize(t *testing.T, run string, outs []bus.Outcome) int {
	t.Helper()
	head := len(`{"v":1,"kind":"batch","run_id":"` + run + `","outcomes":[`)
	n := head + 2 + len(outs) - 1
	for _, o := range outs {
		o.V = bus.Version
		data, err := json.Marshal(o)
		require.NoError(t, err)
		n += len(data)
	}
	return n
}

func TestOutcomeBatchByteBound(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	secret, err := bus.NewRunSecret()
	require.NoError(t, err)
	// Four outcomes whose batch message is exactly MaxBatchBytes long.
	exact := func(extra int) []bus.Outcome {
		outs := make([]bus.Outcome, 4)
		for k := range outs {
			outs[k] = signedOutcome(secret, "r1", k, strings.Repeat("x", 50_000))
		}
		pad := bus.MaxBatchBytes - batchSize(t, "r1", outs) + extra
		outs[3] = signedOutcome(secret, "r1", 3, strings.Repeat("x", 50_000+pad))
		require.Equal(t, bus.MaxBatchBytes+extra, batchSize(t, "r1", outs))
		return outs
	}
	for _, tc := range []struct {
		name     string
		run      string
		extra    int
		messages int
	}{
		{"at the bound", "r1", 0, 1},
		{"one byte past it", "r2", 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs := exact(tc.extra)
			ob := b.NewOutcomeBatch(ctxT(t), tc.run, noTimer)
			for _, o := range outs { // signed for r1, in tc.run's history
				ob.Add(o)
			}
			waitAll(t, ob.Close())
			es := history(t, b, tc.run)
			require.Len(t, es, 4)
			require.Equal(t, tc.messages, messages(es))
			for k, e := range es {
				require.NoError(t, e.Err)
				require.True(t, bus.VerifyOutcome(e.Outcome, bus.TaskToken(secret, "r1", k, 1)))
			}
		})
	}
}

func TestOutcomeLargerThanABatchIsPublishedAloneInOrder(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	secret, err := bus.NewRunSecret()
	require.NoError(t, err)
	ob := b.NewOutcomeBatch(ctxT(t), "r1", noTimer)
	ob.Add(signedOutcome(secret, "r1", 0, "small"))
	ob.Add(signedOutcome(secret, "r1", 1, "small"))
	ob.Add(signedOutcome(secret, "r1", 2, strings.Repeat("y", bus.MaxBatchBytes)))
	ob.Add(signedOutcome(secret, "r1", 3, "small"))
	waitAll(t, ob.Close())
	es := history(t, b, "r1")
	require.Len(t, es, 4)
	require.Equal(t, 3, messages(es), "a batch of 2, the large one alone, the last alone")
	for k, e := range es {
		require.NoError(t, e.Err)
		require.Equal(t, k, e.Outcome.Task)
		require.True(t, bus.VerifyOutcome(e.Outcome, bus.TaskToken(secret, "r1", k, 1)))
	}
	require.Equal(t, es[0].Seq, es[1].Seq)
	require.Less(t, es[1].Seq, es[2].Seq)
	require.Less(t, es[2].Seq, es[3].Seq)
}

func TestOutcomeBatchOfOneIsASingleOutcome(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	got := make(chan *nats.Msg, 4)
	sub, err := b.Conn().ChanSubscribe(bus.OutcomeSubject("r1"), got)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	secret, err := bus.NewRunSecret()
	require.NoError(t, err)
	ob := b.NewOutcomeBatch(ctxT(t), "r1", noTimer)
	ob.Add(signedOutcome(secret, "r1", 7, "ok"))
	waitAll(t, ob.Close())
	msg := <-got
	// What a coordinator of an earlier version reads: an outcome.
	var o bus.Outcome
	require.NoError(t, bus.DecodeStrict(msg.Data, &o))
	require.Equal(t, bus.FactOutcome, o.Kind)
	require.Equal(t, 7, o.Task)
	require.True(t, bus.VerifyOutcome(o, bus.TaskToken(secret, "r1", 7, 1)))
}

func TestOutcomeBatchIsPublishedAfterItsFirstOutcomeWaited(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	got := make(chan *nats.Msg, 4)
	sub, err := b.Conn().ChanSubscribe(bus.OutcomeSubject("r1"), got)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	secret, err := bus.NewRunSecret()
	require.NoError(t, err)
	ob := b.NewOutcomeBatch(ctxT(t), "r1", bus.OutcomeBatchOpts{})
	start := time.Now()
	ob.Add(signedOutcome(secret, "r1", 0, "ok"))
	ob.Add(signedOutcome(secret, "r1", 1, "ok"))
	// No Close: the next resource is still running. The two are
	// published by the timer.
	select {
	case msg := <-got:
		require.GreaterOrEqual(t, time.Since(start), bus.BatchFlushAfter)
		var o bus.Outcome
		require.NoError(t, bus.Decode(msg.Data, &o))
		require.Equal(t, bus.FactBatch, o.Kind)
		require.Len(t, o.Outcomes, 2)
	case <-time.After(10 * time.Second):
		t.Fatal("a batch waiting for its segment's end was not published after BatchFlushAfter")
	}
	ob.Add(signedOutcome(secret, "r1", 2, "ok"))
	ps := ob.Close()
	require.Len(t, ps, 2)
	waitAll(t, ps)
	es := history(t, b, "r1")
	require.Len(t, es, 3)
	require.Equal(t, 2, messages(es))
}

func TestHistoryRefusesMalformedBatches(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	secret, err := bus.NewRunSecret()
	require.NoError(t, err)
	tooMany := bus.Outcome{Kind: bus.FactBatch, RunID: "r1"}
	for k := range bus.MaxBatchOutcomes + 1 {
		tooMany.Outcomes = append(tooMany.Outcomes, signedOutcome(secret, "r1", k, ""))
	}
	nested := bus.Outcome{Kind: bus.FactBatch, RunID: "r1", Outcomes: []bus.Outcome{
		signedOutcome(secret, "r1", 0, ""), {Kind: bus.FactBatch, RunID: "r1", Outcomes: []bus.Outcome{signedOutcome(secret, "r1", 1, "")}}}}
	require.NoError(t, b.PublishFact(ctx, tooMany, ""))
	require.NoError(t, b.PublishFact(ctx, nested, ""))
	require.NoError(t, b.PublishFact(ctx, bus.Outcome{Kind: bus.FactBatch, RunID: "r1"}, ""))
	require.NoError(t, b.PublishFact(ctx, signedOutcome(secret, "r1", 5, ""), ""))

	es := history(t, b, "r1")
	require.Len(t, es, 5)
	require.ErrorContains(t, es[0].Err, "outcome batch of 257 outcomes: more than 256")
	require.NoError(t, es[1].Err)
	require.Equal(t, 0, es[1].Outcome.Task)
	require.Equal(t, 1, es[1].Rest)
	require.ErrorContains(t, es[2].Err, "outcome 1 holds outcomes of its own")
	require.ErrorContains(t, es[3].Err, "outcome batch with no outcomes")
	require.NoError(t, es[4].Err)
	require.Equal(t, 5, es[4].Outcome.Task)
}

func TestHistoryOfARunReadsBatchesInOrder(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	secret, err := bus.NewRunSecret()
	require.NoError(t, err)
	// Before the history is opened (a resuming coordinator's past) ...
	require.NoError(t, b.PublishOutcome(ctx, signedOutcome(secret, "r1", 0, "")))
	ob := b.NewOutcomeBatch(ctx, "r1", noTimer)
	for k := 1; k <= 3; k++ {
		ob.Add(signedOutcome(secret, "r1", k, ""))
	}
	waitAll(t, ob.Close())

	hs := b.NewHistories(nil)
	require.NoError(t, hs.Start(ctx))
	t.Cleanup(hs.Stop)
	h, err := hs.Open(ctx, "r1")
	require.NoError(t, err)
	t.Cleanup(h.Stop)
	// ... and after: a batch, then a single outcome.
	ob = b.NewOutcomeBatch(ctx, "r1", noTimer)
	for k := 4; k <= 5; k++ {
		ob.Add(signedOutcome(secret, "r1", k, ""))
	}
	waitAll(t, ob.Close())
	require.NoError(t, b.PublishOutcome(ctx, signedOutcome(secret, "r1", 6, "")))

	wantRest := []int{0, 2, 1, 0, 1, 0, 0}
	var past uint64
	for k := range 7 {
		e, err := h.Next()
		require.NoError(t, err)
		require.NoError(t, e.Err)
		require.Equal(t, k, e.Outcome.Task)
		require.Equal(t, wantRest[k], e.Rest, "entry %d", k)
		if k == 3 {
			past = e.Seq
		}
	}
	require.Equal(t, past, h.Last(), "the past ends with the last outcome of its batch")
}

// TestHistoryTryNextWaitsOnReady: a run's loop waits on Ready and takes
// what is there with TryNext, which never blocks: the past (read by its
// own consumer, released once read), then the facts stored after, each
// once; nothing there is (false, nil), and an error once stopped.
func TestHistoryTryNextWaitsOnReady(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	secret, err := bus.NewRunSecret()
	require.NoError(t, err)
	for k := range 3 {
		require.NoError(t, b.PublishOutcome(ctx, signedOutcome(secret, "r1", k, "")))
	}
	hs := b.NewHistories(nil)
	require.NoError(t, hs.Start(ctx))
	t.Cleanup(hs.Stop)
	h, err := hs.Open(ctx, "r1")
	require.NoError(t, err)
	t.Cleanup(h.Stop)
	require.Equal(t, 2, hs.Consumers(), "the past is read on a consumer of its own")

	next := func() bus.HistoryEntry {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			e, ok, err := h.TryNext()
			require.NoError(t, err)
			if ok {
				return e
			}
			select {
			case <-h.Ready():
			case <-deadline:
				t.Fatal("no entry within 10s")
			}
		}
	}
	for k := range 3 {
		require.Equal(t, k, next().Outcome.Task)
	}
	require.Equal(t, 1, hs.Consumers(), "the past's consumer is released once read")
	_, ok, err := h.TryNext()
	require.NoError(t, err)
	require.False(t, ok, "nothing more is there")

	require.NoError(t, b.PublishOutcome(ctx, signedOutcome(secret, "r1", 3, "")))
	require.NoError(t, b.PublishOutcome(ctx, signedOutcome(secret, "r1", 4, "")))
	require.Equal(t, 3, next().Outcome.Task)
	require.Equal(t, 4, next().Outcome.Task)

	h.Stop()
	_, ok, err = h.TryNext()
	require.False(t, ok)
	require.ErrorIs(t, err, jetstream.ErrMsgIteratorClosed)
}

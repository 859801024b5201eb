package resources

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// transactions records the ApplyBatch calls of batched fakes.
type transactions struct {
	calls [][]*fake
	// fail makes ApplyBatch fail, after converging the members listed in
	// partial (a transaction that failed half-way).
	fail    error
	partial map[*fake]bool
	// short makes ApplyBatch return one result too few.
	short bool
}

// batched is a fake that can be applied in batches; concurrent makes it
// a ConcurrentChecker.
type batched struct {
	*fake
	tx         *transactions
	concurrent bool
}

func (b batched) ConcurrentCheck() bool { return b.concurrent }

func (b batched) BatchKey(context.Context, *Env) (string, error) { return "fake", nil }

func (b batched) ApplyBatch(ctx context.Context, env *Env, members []Batcher) ([]Result, error) {
	var call []*fake
	for _, m := range members {
		call = append(call, m.(batched).fake)
	}
	b.tx.calls = append(b.tx.calls, call)
	if b.tx.fail != nil {
		for _, f := range call {
			if b.tx.partial[f] {
				f.converged = true
			}
		}
		return nil, b.tx.fail
	}
	var out []Result
	for _, f := range call {
		if f.converged {
			out = append(out, Result{Message: "in sync"})
			continue
		}
		f.converged = !f.neverConverges
		out = append(out, Result{Changed: true, Message: "updated together"})
	}
	if b.tx.short {
		out = out[1:]
	}
	return out, nil
}

// runBatch runs fakes through a Batch, with env for each, and returns
// their outcomes and Apply's error.
func runBatch(t *testing.T, tx *transactions, fakes []*fake, envs ...Env) ([]Outcome, error) {
	t.Helper()
	ctx := context.Background()
	var b Batch
	for i, f := range fakes {
		env := &Env{}
		if i < len(envs) {
			env = &envs[i]
		}
		if got := b.Check(ctx, batched{fake: f, tx: tx}, env); got != i {
			t.Fatalf("Check returned %d for member %d", got, i)
		}
	}
	err := b.Apply(ctx)
	outs := make([]Outcome, len(fakes))
	for i := range fakes {
		outs[i] = b.Finish(ctx, i)
	}
	return outs, err
}

func statuses(outs []Outcome) []Status {
	s := make([]Status, len(outs))
	for i, o := range outs {
		s[i] = o.Status
	}
	return s
}

func requireStatuses(t *testing.T, outs []Outcome, want ...Status) {
	t.Helper()
	if fmt.Sprint(statuses(outs)) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v (outcomes %+v)", statuses(outs), want, outs)
	}
}

func TestBatchAppliesChangedMembersTogether(t *testing.T) {
	t.Parallel()
	tx := &transactions{}
	a, b, c := &fake{}, &fake{converged: true}, &fake{}
	outs, err := runBatch(t, tx, []*fake{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	requireStatuses(t, outs, StatusChanged, StatusStable, StatusChanged)
	if len(tx.calls) != 1 || len(tx.calls[0]) != 2 || tx.calls[0][0] != a || tx.calls[0][1] != c {
		t.Fatalf("ApplyBatch calls %v, want one with a and c", tx.calls)
	}
	for _, f := range []*fake{a, b, c} {
		if f.applies != 0 {
			t.Fatalf("a member was applied alone too")
		}
	}
	// Checked, then re-checked; the stable one only checked.
	if a.checks != 2 || b.checks != 1 || c.checks != 2 {
		t.Fatalf("checks %d %d %d", a.checks, b.checks, c.checks)
	}
	if outs[0].Message != "updated together" || !outs[0].Changed || outs[0].Diff == "" || outs[1].Message != "in sync" {
		t.Fatalf("outcomes %+v", outs)
	}
}

func TestBatchOfOneAppliesAlone(t *testing.T) {
	t.Parallel()
	tx := &transactions{}
	a, b := &fake{}, &fake{converged: true}
	outs, err := runBatch(t, tx, []*fake{a, b})
	if err != nil {
		t.Fatal(err)
	}
	requireStatuses(t, outs, StatusChanged, StatusStable)
	if len(tx.calls) != 0 || a.applies != 1 {
		t.Fatalf("ApplyBatch calls %v, applies %d: one change is applied alone", tx.calls, a.applies)
	}
}

// TestBatchFailureFallsBackToEachAlone: after a failed ApplyBatch each
// member is applied alone, so only the bad one fails, with its own error;
// one the failed operation converged anyway counts as changed.
func TestBatchFailureFallsBackToEachAlone(t *testing.T) {
	t.Parallel()
	errBad := errors.New("no such package")
	a, bad, c := &fake{}, &fake{applyErr: errBad}, &fake{}
	tx := &transactions{fail: errors.New("transaction failed"), partial: map[*fake]bool{c: true}}
	outs, err := runBatch(t, tx, []*fake{a, bad, c})
	if err == nil || err.Error() != "transaction failed" {
		t.Fatalf("Apply: %v", err)
	}
	requireStatuses(t, outs, StatusChanged, StatusFailed, StatusChanged)
	if !errors.Is(outs[1].Err, errBad) || outs[1].Message != "apply: no such package" {
		t.Fatalf("bad member: %+v", outs[1])
	}
	if a.applies != 1 || bad.applies != 1 || c.applies != 1 || len(tx.calls) != 1 {
		t.Fatalf("applies %d %d %d, batches %d", a.applies, bad.applies, c.applies, len(tx.calls))
	}
	if !outs[2].Changed || outs[2].Message != "in sync" {
		t.Fatalf("member converged by the failed batch: %+v", outs[2])
	}
}

func TestBatchWrongResultCountFallsBack(t *testing.T) {
	t.Parallel()
	tx := &transactions{short: true}
	a, b := &fake{}, &fake{}
	outs, err := runBatch(t, tx, []*fake{a, b})
	if !errors.Is(err, ErrBatchResults) {
		t.Fatalf("Apply: %v", err)
	}
	requireStatuses(t, outs, StatusChanged, StatusChanged)
}

func TestBatchNotConverged(t *testing.T) {
	t.Parallel()
	outs, err := runBatch(t, &transactions{}, []*fake{{}, {neverConverges: true}})
	if err != nil {
		t.Fatal(err)
	}
	requireStatuses(t, outs, StatusChanged, StatusFailed)
	if !errors.Is(outs[1].Err, ErrNotConverged) {
		t.Fatalf("outcome %+v", outs[1])
	}
}

// TestBatchClosesAtAFailedCheck: members after one whose check failed are
// not applied with the batch (a caller stopping at the failure, as the
// worker does, never runs them) and are executed alone if finished.
func TestBatchClosesAtAFailedCheck(t *testing.T) {
	t.Parallel()
	tx := &transactions{}
	a, b, broken, c, d := &fake{}, &fake{}, &fake{checkErr: errors.New("boom")}, &fake{}, &fake{}
	ctx := context.Background()
	var batch Batch
	for _, f := range []*fake{a, b, broken, c, d} {
		batch.Check(ctx, batched{fake: f, tx: tx}, &Env{})
	}
	if c.checks != 0 || d.checks != 0 {
		t.Fatal("members after a failed check were checked with the batch")
	}
	if err := batch.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if len(tx.calls) != 1 || len(tx.calls[0]) != 2 || tx.calls[0][0] != a || tx.calls[0][1] != b {
		t.Fatalf("ApplyBatch calls %v, want one with a and b", tx.calls)
	}
	var outs []Outcome
	for i := range 5 {
		outs = append(outs, batch.Finish(ctx, i))
	}
	requireStatuses(t, outs, StatusChanged, StatusChanged, StatusFailed, StatusChanged, StatusChanged)
	if c.applies != 1 || d.applies != 1 || len(tx.calls) != 1 {
		t.Fatal("members after the failure were not executed alone")
	}
}

// TestBatchNoopNeverApplies: noop members join, and their checks are
// their outcomes: nothing is applied.
func TestBatchNoopNeverApplies(t *testing.T) {
	t.Parallel()
	tx := &transactions{}
	a, b := &fake{}, &fake{}
	outs, err := runBatch(t, tx, []*fake{a, b}, Env{Noop: true}, Env{Noop: true})
	if err != nil {
		t.Fatal(err)
	}
	requireStatuses(t, outs, StatusChanged, StatusChanged)
	if len(tx.calls) != 0 || a.applies != 0 || b.applies != 0 || !outs[0].Noop || outs[0].Message != "would update content" {
		t.Fatalf("noop applied: %v %+v", tx.calls, outs)
	}
}

func TestBatchRefreshedMemberRunsAlone(t *testing.T) {
	t.Parallel()
	tx := &transactions{}
	a, r, c := &fake{}, &fake{converged: true, refreshable: true}, &fake{}
	outs, err := runBatch(t, tx, []*fake{a, r, c}, Env{}, Env{Refresh: true}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	requireStatuses(t, outs, StatusChanged, StatusChanged, StatusChanged)
	// The batch ends before the refreshed member: a alone is no batch.
	if len(tx.calls) != 0 || a.applies != 1 || r.applies != 1 || c.applies != 1 || !outs[1].Refreshed {
		t.Fatalf("calls %v applies %d %d %d, outcome %+v", tx.calls, a.applies, r.applies, c.applies, outs[1])
	}
}

func TestBatchPanicsBecomeFailures(t *testing.T) {
	t.Parallel()
	outs, err := runBatch(t, &transactions{}, []*fake{{}, {panics: true}})
	if err != nil {
		t.Fatal(err)
	}
	requireStatuses(t, outs, StatusChanged, StatusFailed)
	if outs[1].Message != "execute: panic: boom" {
		t.Fatalf("outcome %+v", outs[1])
	}
}

func TestBatchCancelled(t *testing.T) {
	t.Parallel()
	errStop := errors.New("worker shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	tx := &transactions{}
	var b Batch
	b.Check(ctx, batched{fake: &fake{}, tx: tx}, &Env{})
	b.Check(ctx, batched{fake: &fake{}, tx: tx}, &Env{})
	cancel(errStop)
	if err := b.Apply(ctx); !errors.Is(err, errStop) || len(tx.calls) != 0 {
		t.Fatalf("Apply after cancel: %v, calls %v", err, tx.calls)
	}
	if out := b.Finish(ctx, 0); out.Status != StatusFailed || !errors.Is(out.Err, errStop) {
		t.Fatalf("outcome %+v", out)
	}
}

// TestBatchSpans: each member's check and re-check run under its own
// context's span; the batch apply has its own span.
func TestBatchSpans(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := trace.NewTracerProvider(trace.WithSyncer(exp))
	tracer := tp.Tracer("test")
	tx := &transactions{}
	var b Batch
	ctxA, spanA := tracer.Start(context.Background(), "a")
	ctxB, spanB := tracer.Start(context.Background(), "b")
	ctxT, spanT := tracer.Start(context.Background(), "transaction")
	b.Check(ctxA, batched{fake: &fake{}, tx: tx}, &Env{})
	b.Check(ctxB, batched{fake: &fake{}, tx: tx}, &Env{})
	if err := b.Apply(ctxT); err != nil {
		t.Fatal(err)
	}
	b.Finish(ctxA, 0)
	b.Finish(ctxB, 1)
	spanA.End()
	spanB.End()
	spanT.End()
	parents := map[string][]string{}
	names := map[string]string{}
	for _, s := range exp.GetSpans() {
		names[s.SpanContext.SpanID().String()] = s.Name
	}
	for _, s := range exp.GetSpans() {
		if p := names[s.Parent.SpanID().String()]; p != "" {
			parents[p] = append(parents[p], s.Name)
		}
	}
	if fmt.Sprint(parents["a"]) != "[check re-check]" || fmt.Sprint(parents["b"]) != "[check re-check]" ||
		fmt.Sprint(parents["transaction"]) != "[apply batch]" {
		t.Fatalf("span tree %v", parents)
	}
}

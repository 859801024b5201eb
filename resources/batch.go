package resources

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Batcher is implemented by types whose resources can be converged together
// when several come one after another on one worker, as mgmt groups
// resources: the package type installs consecutive packages in one
// package-manager transaction. Batch drives it; the caller decides which
// consecutive resources form a batch (those of equal, non-empty BatchKey).
// Types that do not implement it are always executed alone.
type Batcher interface {
	Resource
	// BatchKey returns the key of the batches the resource may join under
	// env, or "" when it is always executed alone. It may look at the host
	// (to choose a provider) but never changes it. Resources of one type
	// with equal keys can be applied by one ApplyBatch.
	BatchKey(ctx context.Context, env *Env) (string, error)
	// ApplyBatch converges members in one operation. They are of the
	// receiver's type and batch key, the receiver first, and each was found
	// changed by its check; env is the first member's. It returns one Result
	// per member, in order, as CheckApply with apply=true would (Changed
	// false for a member found converged already). An error means the
	// operation as a whole failed; Batch then applies each member alone.
	ApplyBatch(ctx context.Context, env *Env, members []Batcher) ([]Result, error)
}

// ErrBatchResults is wrapped by the error of Batch.Apply when ApplyBatch
// returned a number of results other than its number of members.
var ErrBatchResults = errors.New("batch apply returned the wrong number of results")

// Batch executes resources that share a batch key so that those needing a
// change are applied by one ApplyBatch, while each still gets the Outcome
// Execute would give it alone. It runs in three phases, and a member's own
// phases run under the context the caller gives for it (the worker's span
// of that resource):
//
//	var b resources.Batch
//	for each resource r:  i := b.Check(ctxOf(r), r, envOf(r)) // its check
//	err := b.Apply(ctx)                                        // one ApplyBatch
//	for each member i:    out := b.Finish(ctxOf(i), i)         // re-check, health checks
//
// Members keep their order, as if they ran one by one: the batch is the
// members up to the first one that cannot join it (health-check-only, a
// refresh that makes it act) or whose check fails. A noop member joins:
// its check's outcome is its own, it has nothing to apply. That one and every
// later member are executed alone by Finish, after the batch was applied
// (a caller that stops at the first failure, as the worker does, never
// executes them). When fewer than two members need a change, or ApplyBatch
// fails, Finish applies each member alone (CheckApply with apply=true)
// before re-checking it, so a failed operation still gives every member
// its own precise outcome; one that the failed operation converged anyway
// counts as changed. Health checks run in Finish, after the batch.
//
// A Batch is used by one goroutine; Finish is called once per member.
type Batch struct {
	members []batchMember
	// closed is set once a member could not join or failed its check: the
	// members after it are executed alone.
	closed bool
	// failed is set when ApplyBatch failed.
	failed bool
	// pending counts the members Apply would apply (Pending).
	pending int
}

type batchMember struct {
	res   Batcher
	env   *Env
	alone bool     // executed alone by Finish
	done  *Outcome // the check's final outcome (stable, failed)
	check Result
	// applied is this member's result of a successful ApplyBatch.
	applied *Result
	// finished is set by Finish: a member finished before Apply (a
	// lone change the worker applies at once) is left out of it.
	finished bool
}

// Check adds res to the batch and, when it can join, runs its check (a
// "check" span under ctx). It returns the member's index for Finish. A nil
// env means the zero Env.
func (b *Batch) Check(ctx context.Context, res Batcher, env *Env) int {
	if env == nil {
		env = &Env{}
	}
	return b.add(ctx, res, env, nil)
}

// add appends a member; pre, when set, is its check already run.
func (b *Batch) add(ctx context.Context, res Batcher, env *Env, pre *prechecked) int {
	m := batchMember{res: res, env: env}
	if b.closed || !joins(res, env) {
		m.alone, b.closed = true, true
		b.members = append(b.members, m)
		return len(b.members) - 1
	}
	if pre != nil {
		m.check, m.done = pre.check, pre.done
	} else {
		m.check, m.done = checkMember(ctx, res, env)
	}
	if m.done != nil && m.done.Status == StatusFailed {
		b.closed = true
	}
	if m.done == nil {
		b.pending++
	}
	b.members = append(b.members, m)
	return len(b.members) - 1
}

// joins reports whether a member with env may join a batch (one that is
// not closed): a noop member joins, its check's outcome is its own (it
// never has anything to apply); a health-check-only one, or one a
// refresh makes act, is executed alone.
func joins(res Batcher, env *Env) bool {
	return !env.HealthCheckOnly && !(env.Refresh && refreshable(res))
}

// checkMember runs a member's check stage, a panic becoming its failed
// outcome.
func checkMember(ctx context.Context, res Batcher, env *Env) (check Result, done *Outcome) {
	defer func() {
		if r := recover(); r != nil {
			o := failed(ctx, "execute", fmt.Errorf("panic: %v", r))
			check, done = Result{}, &o
		}
	}()
	check, _, done = checkStage(ctx, res, env)
	return check, done
}

// ConcurrentChecker is implemented by Batcher types whose check may run
// beside other resources' checks (Precheck): it changes nothing, and what
// it shares with other resources' checks (caches of directories, of
// account names) is safe for concurrent use.
type ConcurrentChecker interface {
	ConcurrentCheck() bool
}

// BatchItem is a resource for Precheck and AddChecked: its context, the resource and
// its Env (nil: the zero Env).
type BatchItem struct {
	Ctx context.Context
	Res Batcher
	Env *Env
}

// prechecked is a member's check run ahead of its turn.
type prechecked struct {
	check Result
	done  *Outcome
}

// minConcurrentChecks is the fewest items whose checks Precheck spreads
// over goroutines: below it, starting them costs more than it saves.
const minConcurrentChecks = 16

// Prechecks are the checks Precheck ran ahead of the items' turn.
type Prechecks struct {
	pre []*prechecked // by item; nil: none ran ahead
}

// Precheck runs ahead, on up to parallel goroutines, the checks of the
// items whose type is a ConcurrentChecker and that may join a batch: a
// converged segment of files is checked on every core rather than one. It
// touches no Batch, so it may run while the Batch's earlier members are
// finished (Finish) on another goroutine. AddChecked then adds the items
// with those checks. The members, their order, their outcomes and what
// Apply and Finish do are Check's, one item after the other; only an item
// after one whose check failed (or that could not join) may have been
// checked for nothing: it is executed alone by Finish, as with Check, and
// checked again there.
func Precheck(items []BatchItem, parallel int) Prechecks {
	for i := range items {
		if items[i].Env == nil {
			items[i].Env = &Env{}
		}
	}
	var idx []int
	for i, it := range items {
		if cc, ok := it.Res.(ConcurrentChecker); ok && cc.ConcurrentCheck() && joins(it.Res, it.Env) {
			idx = append(idx, i)
		}
	}
	if parallel < 2 || len(idx) < minConcurrentChecks {
		return Prechecks{}
	}
	checks := make([]prechecked, len(idx))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(parallel, len(idx)) {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= len(idx) {
					return
				}
				it := items[idx[k]]
				checks[k].check, checks[k].done = checkMember(it.Ctx, it.Res, it.Env)
			}
		})
	}
	wg.Wait()
	pre := make([]*prechecked, len(items))
	for k, i := range idx {
		pre[i] = &checks[k]
	}
	return Prechecks{pre: pre}
}

// AddChecked adds items to the batch as Check would, one after the other,
// with the checks pre ran ahead (Precheck of these very items); an item
// without one is checked now.
func (b *Batch) AddChecked(items []BatchItem, pre Prechecks) {
	for i, it := range items {
		if it.Env == nil {
			it.Env = &Env{}
		}
		var p *prechecked
		if pre.pre != nil {
			p = pre.pre[i]
		}
		b.add(it.Ctx, it.Res, it.Env, p)
	}
}

// Decided reports whether member i's outcome needs nothing of Apply: its
// check decided it (nothing to apply, a failure, a noop member's check), or
// it is executed alone. While members 0 to i are all decided, each may be
// finished, in order, before the batch's last Check and Apply: the worker
// answers the members of a converged segment as it checks them, and
// applies together only those from the first with something to apply on.
func (b *Batch) Decided(i int) bool {
	m := b.members[i]
	return m.alone || m.done != nil
}

// Pending is how many members Apply would apply together: those whose
// check found a change and that joined the batch. Apply does nothing
// when it is below two.
func (b *Batch) Pending() int { return b.pending }

// Apply applies every member whose check found a change with one
// ApplyBatch of the first of them, in an "apply batch" span under ctx, when
// there are at least two; otherwise it does nothing and Finish applies the
// one alone. It returns ApplyBatch's error, after which Finish applies each
// member alone. Call it once, after the last Check.
func (b *Batch) Apply(ctx context.Context) (err error) {
	var (
		idx     []int
		members []Batcher
	)
	for i, m := range b.members {
		if !m.alone && m.done == nil && !m.finished {
			idx = append(idx, i)
			members = append(members, m.res)
		}
	}
	if len(members) < 2 {
		return nil
	}
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer("github.com/manifold-run/manifold/resources")
	ctx, span := tracer.Start(ctx, "apply batch", trace.WithAttributes(attribute.Int("manifold.batch.size", len(members))))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
		if err != nil {
			b.failed = true
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	if ctx.Err() != nil {
		return fmt.Errorf("apply batch: %w", context.Cause(ctx))
	}
	results, err := members[0].ApplyBatch(ctx, b.members[idx[0]].env, members)
	if err != nil {
		return err
	}
	if len(results) != len(members) {
		return fmt.Errorf("%w: %d for %d members", ErrBatchResults, len(results), len(members))
	}
	for k, i := range idx {
		b.members[i].applied = &results[k]
	}
	return nil
}

// Finish ends member i (an index Check returned) and returns its Outcome:
// after a successful Apply its re-check, otherwise its own apply and
// re-check (or, for a member executed alone, all of Execute), then its
// health checks, under ctx. A panic in the resource becomes a failed
// Outcome.
func (b *Batch) Finish(ctx context.Context, i int) (out Outcome) {
	m := b.members[i]
	if !m.finished && !m.alone && m.done == nil {
		b.pending--
	}
	b.members[i].finished = true
	if m.alone {
		return Execute(ctx, m.res, m.env)
	}
	defer func() {
		if r := recover(); r != nil {
			out = failed(ctx, "execute", fmt.Errorf("panic: %v", r))
		}
	}()
	switch {
	case m.done != nil:
		out = *m.done
	case m.applied != nil && !m.applied.Changed:
		// Converged between its check and the batch.
		out = Outcome{Status: StatusStable, Message: m.applied.Message}
	case m.applied != nil:
		out = verify(ctx, m.res, m.env, m.check, *m.applied, false)
	default:
		out = applyStage(ctx, m.res, m.env, m.check, false, b.failed)
	}
	out = withHealthChecks(ctx, m.env, out)
	out.Diff = BoundDiff(out.Diff) // as Execute
	return out
}

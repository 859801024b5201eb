package worker

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/ids"
	"github.com/manifold-run/manifold/resources/safefs"
)

// batchResult is the outcome of one resource executed in a batch.
type batchResult struct {
	outcome  bus.Outcome
	released bool
	log      *slog.Logger // the member's logger (itemLog)
}

// batchMember is one resource of a batch being executed.
type batchMember struct {
	item *bus.Task // in the task's items, not copied
	res  resources.Batcher
	env  *resources.Env
	log  *slog.Logger
	span trace.Span
}

// batchChunk is how many members of a batch executeBatch prepares and
// checks before it answers those whose checks decided their outcomes: the
// coordinator folds their outcomes (and the server stores their events)
// while the worker goes on with the next members, rather than after the
// whole segment.
const batchChunk = 64

// executeBatch executes items[k] and the items after it together when they
// form a batch: consecutive resources of one type that converges several
// at once (resources.Batcher: packages installed in one package-manager
// transaction) with equal batch keys. Only resources that decide nothing
// on their own join: not in health-check-only mode, no refresh, no
// control guards, no retry, and not answered from a record of an earlier
// delivery (noop ones join: their checks are their outcomes, nothing is
// applied). The members' checks run side by side on every core when their
// type allows it (resources.Precheck, resources.ConcurrentChecker:
// files).
//
// The members are prepared and checked batchChunk at a time, a chunk's
// checks running (on every core) while this goroutine answers the chunk
// before it and prepares the one after. While every member checked so far
// has its outcome decided by its check (converged, noop, failed) it is
// answered at once, in order (emit), so a converged segment's outcomes
// stream out as it goes; a lone member with something to apply (the only
// one among those checked) is applied alone as it is met. From two on,
// the batch is checked to its end and applied together (one transaction,
// one pair of syncs for files), then answered.
// emit is given each member's index in items and its outcome, in order,
// up to and including the first failed one (or the one the worker's
// shutdown released); it returns false to end the batch there (a cancelled
// run, a failure ending the segment). executeBatch returns how many items
// it answered, or 0 when items[k] starts no batch of at least two: it is
// then executed alone.
//
// Each member has its own span ("execute <ref>") holding its check and
// re-check; the batch's apply is in an "execute batch" span under the first
// member's, linked to the others'. The batch is bound by the sum of the
// timeouts of the resources that may join it, within the segment's
// deadline.
func (w *Worker) executeBatch(ctx context.Context, d *bus.Delivery, task bus.Task, items []bus.Task, k int, emit func(int, batchResult) bool) int {
	n := k
	for n < len(items) && w.mayBatch(items[n]) && items[n].Resource.Type == items[k].Resource.Type {
		n++
	}
	if n-k < 2 || (!items[k].Deadline.IsZero() && time.Now().After(items[k].Deadline)) {
		return 0
	}
	workDir, cleanup, err := w.workDir(ctx, items[k])
	if err != nil {
		return 0 // executed alone, which reports the error
	}
	defer cleanup()

	start := time.Now()
	var total time.Duration
	for i := k; i < n; i++ {
		total += items[i].Timeout()
	}
	deadline := start.Add(total)
	if dl := items[k].Deadline; !dl.IsZero() && dl.Before(deadline) {
		deadline = dl
	}
	execCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	execCtx, cancelDeadline := context.WithDeadlineCause(execCtx, deadline, fmt.Errorf("timed out after %s (a batch of up to %d resources)", total, n-k))
	defer cancelDeadline()
	// Its members' diffs judge each directory's "readable by others" once
	// (no member changes a directory: a directory resource is executed
	// alone, ending the batch).
	execCtx = safefs.WithReach(execCtx, safefs.NewReach())
	// Its members share one cancellation (a run cancelled cancels them
	// all), registered once for the batch rather than once a member.
	untrack := w.trackCancel(items[k], cancel)
	defer untrack()
	// The checks apply nothing (nor does anything in noop): owner and
	// group names resolve against one look at /etc/passwd and /etc/group
	// (ids.Snapshot), not a stat of each per file. Applies and re-checks
	// look again, after the batch may have changed an account database.
	snap := ids.NewSnapshot()

	// Sized at once: a member holds its task (hundreds of bytes), and a
	// segment of 256 grew the slice eight times.
	members := make([]batchMember, 0, n-k)
	ctxs := make([]context.Context, 0, n-k) // member i's span in the batch's execution context
	var (
		key       string
		batch     resources.Batch
		next      = k // the next item to prepare
		answered  = 0 // members answered
		streaming = true
	)
	// answer finishes member i and hands its outcome to emit; false ends
	// the batch (the members after it are not run in it).
	answer := func(i int) bool {
		m := members[i]
		m.span.SetAttributes(attribute.Int("manifold.batch.size", len(members)))
		o := taskOutcome(execCtx, batch.Finish(ctxs[i], i))
		w.afterExecute(ctxs[i], *m.item, m.env, &o, m.log) // as execute does: register_when_stable, the fleet view
		o, released := w.settle(ctx, d, *m.item, m.span, o, start, m.log)
		answered++
		return emit(k+i, batchResult{outcome: o, released: released, log: m.log}) && !released && o.Status != bus.TaskFailed
	}
	// notRun ends the spans of the members after the last answered.
	notRun := func() int {
		if answered == 0 {
			return 0
		}
		last := members[answered-1].item.Resource.Ref()
		for _, rest := range members[answered:] {
			// The segment goes on with them (in a batch of their own), or
			// ends and the coordinator takes them back.
			rest.span.SetAttributes(attribute.String("manifold.status", "not run"))
			rest.span.AddEvent("not run in this batch: " + last + " ended it")
			rest.span.End()
			w.metrics.notRun(rest.item.Pool)
		}
		return answered
	}
	// The checks of a chunk run (resources.Precheck, on every core) while
	// this goroutine answers the chunk before it and prepares the one
	// after: fly is the chunk whose checks are under way, added to the
	// batch (land) once they ended, before the next is launched.
	type flight struct {
		checks []resources.BatchItem
		pre    resources.Prechecks
		done   chan struct{}
	}
	var fly *flight
	added := 0 // members added to the batch
	land := func() {
		if fly == nil {
			return
		}
		<-fly.done
		batch.AddChecked(fly.checks, fly.pre)
		added += len(fly.checks)
		fly = nil
	}
	// stream answers the added members whose checks decided their
	// outcomes, in order; false when the batch ends there.
	stream := func() bool {
		for streaming && answered < added {
			if !batch.Decided(answered) && batch.Pending() > 1 {
				streaming = false // changes to apply: the rest is checked, then applied together
				break
			}
			// Decided, or the one member checked so far with something to
			// apply (a drifted file among converged ones): applied alone
			// now, as it would be in a batch of fewer than two, and the
			// segment streams on.
			if !answer(answered) {
				return false
			}
		}
		return true
	}
	for {
		first := len(members)
		for next < n && len(members)-first < batchChunk {
			item := &items[next] // 664 bytes: not copied
			if _, ok := w.recorded(ctx, d, item); ok {
				n = next // answered from its record, not executed
				break
			}
			log := w.itemLog(item, d)
			res, env, early := w.prepareIn(item, workDir, log, environOf(ctx), segmentScopeOf(ctx))
			if early != nil {
				n = next
				break
			}
			b, ok := res.(resources.Batcher)
			w.batchTypes.Store(item.Resource.Type, ok)
			if !ok {
				n = next
				break
			}
			kk, err := b.BatchKey(ctx, env)
			if err != nil || kk == "" || (len(members) > 0 && kk != key) {
				n = next
				break
			}
			key = kk
			members = append(members, batchMember{item: item, res: b, env: env, log: log})
			if w.assign != nil { // a task of an assignment's run: watch its paths after, as execute does
				defer w.assign.executing(*item)(res)
			}
			next++
		}
		if len(members) < 2 {
			return 0 // only before any check was launched
		}
		fresh := members[first:]
		checks := make([]resources.BatchItem, len(fresh))
		for j := range fresh {
			m := &fresh[j]
			if w.assign != nil { // tasks of an assignment's run: kept for its plan, as execute does
				w.assign.collect(*m.item)
			}
			w.metrics.started(m.item.Pool, d.Attempt)
			m.span = w.startSpan(itemTrace(d, task, k+first+j), *m.item, d.Attempt)
			if m.span.IsRecording() { // the attribute's slice is an allocation per resource
				m.span.SetAttributes(attribute.String("manifold.batch.key", key))
			}
			if m.log.Enabled(ctx, slog.LevelError) {
				m.log = withSpan(m.log, m.span.SpanContext())
				m.env.Logger = m.log
			}
			mctx := trace.ContextWithSpan(execCtx, m.span)
			checks[j] = resources.BatchItem{Ctx: ids.WithSnapshot(mctx, snap), Res: m.res, Env: m.env}
			if m.item.Noop {
				mctx = checks[j].Ctx
			}
			ctxs = append(ctxs, mctx)
		}
		land()
		if len(checks) > 0 {
			f := &flight{checks: checks, done: make(chan struct{})}
			go func() {
				defer close(f.done)
				f.pre = resources.Precheck(f.checks, runtime.GOMAXPROCS(0))
			}()
			fly = f
		}
		if !stream() {
			if fly != nil {
				<-fly.done // its members' spans are ended below
			}
			return notRun()
		}
		if fly == nil {
			break // every member prepared is in the batch
		}
	}
	if batch.Pending() >= 2 {
		// Only a batch with something to apply has a transaction (a
		// converged segment of files has none).
		refs := make([]string, 0, len(members)-answered)
		links := make([]trace.Link, 0, len(members)-answered)
		for _, m := range members[answered:] {
			refs = append(refs, m.item.Resource.Ref())
			links = append(links, trace.Link{SpanContext: m.span.SpanContext()})
		}
		txCtx, txSpan := w.tracer.Start(ctxs[answered], "execute batch", trace.WithLinks(links...), trace.WithAttributes(
			attribute.String("manifold.batch.key", key), attribute.StringSlice("manifold.batch.refs", refs)))
		if err := batch.Apply(txCtx); err != nil {
			txSpan.SetStatus(codes.Error, err.Error())
			members[answered].log.Warn("batch failed; each resource is applied alone", "batch", key, "resources", refs, "error", err)
		}
		txSpan.End()
	}
	for answered < len(members) {
		if !answer(answered) {
			break
		}
	}
	return notRun()
}

// mayBatch reports whether item may join a batch, before its resource is
// built: it decides nothing on its own (no health-check-only, refresh,
// control guards or retry), and its type is not known to be executed
// alone. Noop items join: resources.Batch executes each alone (nothing is
// applied), in the batch's tight loop, so a noop run costs what a
// converged one does.
func (w *Worker) mayBatch(item bus.Task) bool {
	r := item.Resource
	if item.HealthCheckOnly || item.Refresh || r.Control != nil || r.Retry > 0 {
		return false
	}
	batches, known := w.batchTypes.Load(r.Type)
	return !known || batches.(bool)
}

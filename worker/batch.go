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
	item bus.Task
	res  resources.Batcher
	env  *resources.Env
	log  *slog.Logger
	span trace.Span
}

// executeBatch executes items[k] and the items after it together when they
// form a batch: consecutive resources of one type that converges several
// at once (resources.Batcher: packages installed in one package-manager
// transaction) with equal batch keys. Only resources that decide nothing
// on their own join: not in health-check-only mode, no refresh, no
// control guards, no retry, and not answered from a record of an earlier
// delivery (noop ones join: their checks are their outcomes, nothing is
// applied). The members' checks run side by side on every core when their
// type allows it (resources.Batch.CheckAll, resources.ConcurrentChecker:
// files). It returns the members' outcomes in order, up to and including
// the first failed one (or the one the worker's shutdown released), or nil
// when items[k] starts no batch of at least two: it is then executed alone.
//
// Each member has its own span ("execute <ref>") holding its check and
// re-check; the batch's apply is in an "execute batch" span under the first
// member's, linked to the others'. The batch is bound by the sum of its
// members' timeouts, within the segment's deadline.
func (w *Worker) executeBatch(ctx context.Context, d *bus.Delivery, task bus.Task, items []bus.Task, k int) []batchResult {
	n := k
	for n < len(items) && w.mayBatch(items[n]) && items[n].Resource.Type == items[k].Resource.Type {
		n++
	}
	if n-k < 2 || (!items[k].Deadline.IsZero() && time.Now().After(items[k].Deadline)) {
		return nil
	}
	workDir, cleanup, err := w.workDir(ctx, items[k])
	if err != nil {
		return nil // executed alone, which reports the error
	}
	defer cleanup()

	// Sized at once: a member holds its task (hundreds of bytes), and a
	// segment of 256 grew the slice eight times.
	members := make([]batchMember, 0, n-k)
	var key string
	for _, item := range items[k:n] {
		if _, ok := w.recorded(ctx, d, item); ok {
			break // answered from its record, not executed
		}
		log := w.itemLog(item, d)
		res, env, early := w.prepareIn(item, workDir, log, environOf(ctx), segmentScopeOf(ctx))
		if early != nil {
			break
		}
		b, ok := res.(resources.Batcher)
		w.batchTypes.Store(item.Resource.Type, ok)
		if !ok {
			break
		}
		kk, err := b.BatchKey(ctx, env)
		if err != nil || kk == "" || (len(members) > 0 && kk != key) {
			break
		}
		key = kk
		members = append(members, batchMember{item: item, res: b, env: env, log: log})
		if w.assign != nil { // a task of an assignment's run: watch its paths after, as execute does
			defer w.assign.executing(item)(res)
		}
	}
	if len(members) < 2 {
		return nil
	}
	if w.assign != nil { // tasks of an assignment's run: kept for its plan, as execute does
		for _, m := range members {
			w.assign.collect(m.item)
		}
	}

	start := time.Now()
	var total time.Duration
	for _, m := range members {
		total += m.item.Timeout()
	}
	deadline := start.Add(total)
	if dl := members[0].item.Deadline; !dl.IsZero() && dl.Before(deadline) {
		deadline = dl
	}
	execCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	execCtx, cancelDeadline := context.WithDeadlineCause(execCtx, deadline, fmt.Errorf("timed out after %s (a batch of %d resources)", total, len(members)))
	defer cancelDeadline()
	// Its members' diffs judge each directory's "readable by others" once
	// (no member changes a directory: a directory resource is executed
	// alone, ending the batch).
	execCtx = safefs.WithReach(execCtx, safefs.NewReach())

	// ctxs[i] is member i's span in the batch's execution context.
	ctxs := make([]context.Context, len(members))
	refs := make([]string, len(members))
	links := make([]trace.Link, len(members))
	for i := range members {
		m := &members[i]
		w.metrics.started(m.item.Pool, d.Attempt)
		m.span = w.startSpan(itemTrace(d, task, k+i), m.item, d.Attempt)
		m.span.SetAttributes(attribute.String("manifold.batch.key", key), attribute.Int("manifold.batch.size", len(members)))
		if m.log.Enabled(ctx, slog.LevelError) {
			m.log = withSpan(m.log, m.span.SpanContext())
			m.env.Logger = m.log
		}
		ctxs[i] = trace.ContextWithSpan(execCtx, m.span)
		untrack := w.trackCancel(m.item, cancel)
		defer untrack()
		refs[i] = m.item.Resource.Ref()
		links[i] = trace.Link{SpanContext: m.span.SpanContext()}
	}

	// The checks apply nothing (nor does anything in noop): owner and
	// group names resolve against one look at /etc/passwd and /etc/group
	// (ids.Snapshot), not a stat of each per file. Applies and re-checks
	// look again, after the batch may have changed an account database.
	// The checks of a segment's files run on every core
	// (resources.Batch.CheckAll): while the worker checks, the
	// coordinator and the server wait for its outcomes.
	snap := ids.NewSnapshot()
	var batch resources.Batch
	checks := make([]resources.BatchItem, len(members))
	for i, m := range members {
		checks[i] = resources.BatchItem{Ctx: ids.WithSnapshot(ctxs[i], snap), Res: m.res, Env: m.env}
		if m.item.Noop {
			ctxs[i] = checks[i].Ctx
		}
	}
	batch.CheckAll(checks, runtime.GOMAXPROCS(0))
	if batch.Pending() >= 2 {
		// Only a batch with something to apply has a transaction (a
		// converged segment of files has none).
		txCtx, txSpan := w.tracer.Start(ctxs[0], "execute batch", trace.WithLinks(links...), trace.WithAttributes(
			attribute.String("manifold.batch.key", key), attribute.StringSlice("manifold.batch.refs", refs)))
		if err := batch.Apply(txCtx); err != nil {
			txSpan.SetStatus(codes.Error, err.Error())
			members[0].log.Warn("batch failed; each resource is applied alone", "batch", key, "resources", refs, "error", err)
		}
		txSpan.End()
	}

	results := make([]batchResult, 0, len(members))
	for i, m := range members {
		o := taskOutcome(execCtx, batch.Finish(ctxs[i], i))
		w.afterExecute(ctxs[i], m.item, m.env, &o, m.log) // as execute does: register_when_stable, the fleet view
		o, released := w.settle(ctx, d, m.item, m.span, o, start, m.log)
		results = append(results, batchResult{outcome: o, released: released, log: m.log})
		if released || o.Status == bus.TaskFailed {
			// The rest are not executed in this batch: the segment goes on
			// with them (in a batch of their own), or ends and the
			// coordinator takes them back.
			for _, rest := range members[i+1:] {
				rest.span.SetAttributes(attribute.String("manifold.status", "not run"))
				rest.span.AddEvent("not run in this batch: " + m.item.Resource.Ref() + " failed before it")
				rest.span.End()
				w.metrics.notRun(rest.item.Pool)
			}
			break
		}
	}
	return results
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

package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/safefs"
	"github.com/manifold-run/manifold/resources/template"
)

// resultKey is where a task attempt's outcome is recorded.
func resultKey(t bus.Task) string {
	return t.RunID + "." + strconv.Itoa(t.Task) + "." + strconv.Itoa(t.Attempt)
}

// publishPatience bounds how long a worker retries the publications of a
// finished task (result records, outcomes) before it gives the task back.
const publishPatience = 2 * time.Minute

// handle executes one delivered task and answers it. A segment task
// holds several resources: each is executed in order and answered by its
// own outcome as it finishes. The segment ends before a resource that
// requires a failed or skipped resource of the segment, after a failure
// with retries left, or (a task without ContinueAfterFailure) at the
// first failed or skipped resource; the coordinator, reading that
// outcome, takes the rest back unexecuted and decides on them again. Each
// outcome is recorded, then published; the task is acked once every
// outcome is durable. A resource whose outcome was recorded by an earlier
// delivery is answered from the record without executing. Consecutive
// resources that form a batch (packages of one provider) are executed
// together by executeBatch, then answered one by one as above.
func (w *Worker) handle(ctx context.Context, d *bus.Delivery) { w.handleIn(ctx, d, nil) }

// handleIn is handle for a handler that keeps a directory cache (nil: none)
// across the tasks it handles one after another.
func (w *Worker) handleIn(ctx context.Context, d *bus.Delivery, keep *handlerCache) {
	var task bus.Task
	if err := bus.DecodeTask(d.Data(), &task); err != nil {
		w.log.Error("task dropped: unreadable", "subject", d.Subject(), "error", err)
		_ = d.Term(err.Error())
		return
	}
	if task.Ref != "" {
		full, err := w.bus.ResolveTask(ctx, task)
		if err != nil {
			// The store may be electing a leader: the task comes back.
			w.log.Error("task by reference not readable; it is delivered again", "run_id", task.RunID, "task", task.Task, "error", err)
			_ = d.Nak(time.Second)
			return
		}
		task = full
	}
	log := w.log.With("run_id", task.RunID, "manifest", task.Manifest, "delivery", d.Attempt)
	if w.dropCancelled(ctx, d, cancelProbe(task), log) {
		return
	}
	if !w.claim(task.MsgID(), task.Resource.Ref()) {
		// Not acked, not nak'd: the running delivery's ack settles the
		// message, or a later redelivery is answered from the record.
		log.Warn("redelivered task is still running on this worker; not run twice", "resource", task.Resource.Ref())
		return
	}
	defer w.track(task.MsgID(), task.Resource.Ref(), false)
	final := context.WithoutCancel(ctx)
	stopProgress := w.progress(ctx, d)
	defer stopProgress()
	switch {
	case len(task.Segment) > 0:
		// The resources of a segment open each parent directory once.
		dirs := safefs.NewDirs()
		defer dirs.Close()
		ctx = safefs.WithDirs(ctx, dirs)
		// And see one copy of the process environment (templates' Environ),
		// not a copy each, and render over one template scope.
		ctx = withSegmentScope(withEnviron(ctx, environ()))
	case keep != nil:
		// Single tasks of one run handled one after another (a chain) share
		// them as a segment's resources do.
		dirs, env := keep.forTask(task.RunID)
		ctx = withEnviron(safefs.WithDirs(ctx, dirs), env)
	}

	items := make([]bus.Task, 0, 1+len(task.Segment))
	first := task
	first.Segment = nil
	items = append(items, first)
	for _, it := range task.Segment {
		t := first
		t.Task, t.Attempt, t.Resource, t.Refresh, t.TimeoutMS = it.Task, it.Attempt, it.Resource, it.Refresh, it.TimeoutMS
		t.Token, t.Subscribers, t.Assume = it.Token, it.Subscribers, it.Assume
		items = append(items, t)
	}
	for k := range items {
		// A refresh owed by an earlier run (its subscriber failed, was
		// skipped, or the process died before it ran) is given now.
		if d, ok := w.debts.owes(items[k]); ok && !items[k].Refresh && !items[k].Noop {
			items[k].Refresh = true
			log.Info("refresh owed since an earlier run", "resource", d.Ref, "cause", d.Cause, "since", d.Since, "cause_run_id", d.RunID)
		}
	}
	var pending []*bus.Pending
	var batch *bus.OutcomeBatch // the segment's outcomes, when its coordinator reads batches
	if task.BatchOutcomes && len(items) > 1 {
		batch = w.bus.NewOutcomeBatch(final, task.RunID, bus.OutcomeBatchOpts{Size: batchChunk})
	}
	ended := map[int]bool{} // tasks of the segment that failed or were skipped
	released := false       // the worker is stopping: the whole task goes to another worker
	// answer ends item with its outcome: the refresh debt settled, the
	// outcome recorded and published. It reports whether the segment goes
	// on after it.
	answer := func(item bus.Task, o bus.Outcome, rel bool, ilog *slog.Logger) bool {
		if rel {
			if batch != nil {
				batch.Close() // what finished is told, unwaited, as single outcomes would be
			}
			released = true
			return false
		}
		if err := w.debts.settle(final, item, o); err != nil {
			ilog.Error("refresh debt not recorded", "error", err)
		}
		pending = append(pending, w.record(final, item, o, ilog, batch)...)
		if o.Status == bus.TaskFailed || o.Status == bus.TaskSkipped {
			ended[item.Task] = true
			if !task.ContinueAfterFailure || o.Status == bus.TaskFailed && item.Attempt <= item.Resource.Retry {
				return false // the coordinator takes the rest back and decides on them again
			}
		}
		return true
	}
	// endsAt reports whether the segment ends before items[k].
	endsAt := func(k int) bool {
		return k > 0 && (endsBefore(task.Segment[k-1], ended) || w.runCancelled(task))
	}
	for k := 0; k < len(items); {
		if endsAt(k) {
			break // the coordinator takes the rest back and skips the requirers
		}
		item := items[k]
		traceCtx := itemTrace(d, task, k)
		if k > 0 {
			// Each resource of a segment has its own bound, within the
			// segment's deadline.
			if dl := time.Now().Add(item.Timeout()); item.Deadline.IsZero() || dl.Before(item.Deadline) {
				item.Deadline = dl
			}
		} else if len(items) > 1 {
			if dl := time.Now().Add(item.Timeout()); dl.Before(item.Deadline) {
				item.Deadline = dl
			}
		}
		goesOn := true
		n := w.executeBatch(ctx, d, task, items, k, func(i int, r batchResult) bool {
			if i > k && endsAt(i) {
				goesOn = false
				return false
			}
			// The batch built the member's logger already.
			goesOn = answer(items[i], r.outcome, r.released, r.log)
			return goesOn
		})
		if n == 0 {
			ilog := w.itemLog(&item, d)
			o, rel := w.handleOne(ctx, traceCtx, d, item, ilog)
			n, goesOn = 1, answer(item, o, rel, ilog)
		}
		if released {
			return
		}
		if !goesOn {
			break
		}
		k += n
	}
	if batch != nil {
		pending = append(pending, batch.Close()...)
	}
	// Publications are retried while the cluster recovers (the task is
	// kept in progress meanwhile), up to publishPatience: a task nak'd
	// here runs again from its record only if that record was stored.
	pctx, cancel := context.WithTimeout(final, publishPatience)
	defer cancel()
	for _, p := range pending {
		if err := p.Wait(pctx); err != nil {
			log.Error("outcome not published; the task will be redelivered", "error", err)
			_ = d.Nak(time.Second)
			return
		}
	}
	// The outcomes are durable: acked once the next task is there (or
	// soon), not waited for (heldAcks).
	w.acks.add(d)
}

// cancelProbe is task as dropCancelled looks its runs up: a root run's
// task names its run twice (RunID and RootRunID), and one look-up of the
// cancellations bucket answers for both (a round trip per task message
// saved).
func cancelProbe(task bus.Task) bus.Task {
	if task.RootRunID == task.RunID {
		task.RootRunID = ""
	}
	return task
}

// endsBefore reports whether a segment ends before item: it requires a
// resource of the segment that failed or was skipped (the coordinator
// skips it). The coordinator's state machine applies the same rule.
func endsBefore(item bus.SegmentItem, ended map[int]bool) bool {
	for _, t := range item.Requires {
		if ended[t] {
			return true
		}
	}
	return false
}

// itemTrace returns the trace context of item k of a segment task: the
// delivery's for the first, the one the coordinator gave for the others.
func itemTrace(d *bus.Delivery, task bus.Task, k int) context.Context {
	if k == 0 {
		return d.Ctx
	}
	return bus.WithTraceparent(context.Background(), task.Segment[k-1].Traceparent)
}

// itemLog is the logger of one resource of a task.
// Its attributes are formatted only if it logs (itemHandler).
func (w *Worker) itemLog(item *bus.Task, d *bus.Delivery) *slog.Logger {
	return slog.New(newItemHandler(w.log.Handler(), item, d.Attempt))
}

// handleOne executes one resource of a task, or answers it from its
// record. released is true when the worker's shutdown interrupted it.
func (w *Worker) handleOne(ctx, traceCtx context.Context, d *bus.Delivery, task bus.Task, log *slog.Logger) (o bus.Outcome, released bool) {
	if o, ok := w.recorded(ctx, d, &task); ok {
		o.Replayed, o.Delivery = true, d.Attempt
		log.Info("redelivered task answered from its recorded outcome", "status", o.Status)
		return o, false
	}
	w.metrics.started(task.Pool, d.Attempt)
	span := w.startSpan(traceCtx, task, d.Attempt)
	if log.Enabled(ctx, slog.LevelError) {
		log = withSpan(log, span.SpanContext())
	}
	start := time.Now()
	execCtx, cancel := context.WithCancelCause(ctx)
	untrack := w.trackCancel(task, cancel)
	o = w.execute(trace.ContextWithSpan(execCtx, span), task, log)
	untrack()
	cancel(nil)
	return w.settle(ctx, d, task, span, o, start, log)
}

// recorded returns the outcome an earlier delivery recorded for task, if
// any. Only a message delivered before, or published again by a resuming
// coordinator, can have one: a first delivery is executed without a lookup
// (a round trip per resource).
func (w *Worker) recorded(ctx context.Context, d *bus.Delivery, task *bus.Task) (bus.Outcome, bool) {
	if d.Attempt <= 1 && !task.Resumed {
		return bus.Outcome{}, false // with no outcome on the heap: one per resource
	}
	return w.lookupRecord(ctx, task)
}

// lookupRecord reads task's result record (recorded).
func (w *Worker) lookupRecord(ctx context.Context, task *bus.Task) (o bus.Outcome, ok bool) {
	e, err := w.bus.Results().Get(ctx, resultKey(*task))
	if err != nil || json.Unmarshal(e.Value, &o) != nil {
		return o, false
	}
	if task.Token != "" && !bus.VerifyOutcome(o, task.Token) {
		// Every worker can write the results bucket: a record not signed
		// with this task's token was not written by the worker the task
		// was delivered to, and its coordinator would refuse it.
		w.log.Warn("recorded outcome ignored: not signed with the task's token; executing the task",
			"run_id", task.RunID, "task", task.Task, "attempt", task.Attempt, "recorded_worker", o.Worker)
		return bus.Outcome{}, false
	}
	return o, true
}

// consumerSpan is the option every resource's span starts with.
var consumerSpan = trace.WithSpanKind(trace.SpanKindConsumer)

// startSpan starts the span of one resource's execution, "execute <ref>",
// under traceCtx. Its name and attributes are set only when the span
// records: with no exporter (telemetry's ID-only provider) nothing would
// keep them, and building them was a dozen allocations per resource. No
// sampler manifold offers reads the name or attributes at start, so
// setting them after is the same.
func (w *Worker) startSpan(traceCtx context.Context, task bus.Task, delivery int) trace.Span {
	// Named once it records: the name's two strings were allocations per
	// resource for spans that record nothing.
	_, span := w.tracer.Start(traceCtx, "execute", consumerSpan)
	if !span.IsRecording() {
		return span
	}
	ref := task.Resource.Ref()
	span.SetName("execute " + ref)
	span.SetAttributes(
		attribute.String("manifold.run_id", task.RunID),
		attribute.String("manifold.root_run_id", task.RootRunID),
		attribute.String("manifold.resource.ref", ref),
		attribute.String("manifold.resource.type", task.Resource.Type),
		attribute.String("manifold.resource.name", task.Resource.Name),
		attribute.String("manifold.manifest", task.Manifest),
		attribute.Int("manifold.attempt", task.Attempt),
		attribute.Int("manifold.delivery", delivery),
		attribute.Bool("manifold.noop", task.Noop),
		attribute.String("manifold.worker", w.cfg.Name),
		attribute.String("manifold.pool", task.Pool),
	)
	return span
}

// settle completes the outcome of one executed resource (started at
// start), ends its span and counts it. released is true when the worker's
// shutdown interrupted it: the task is then nak'd for another worker.
func (w *Worker) settle(ctx context.Context, d *bus.Delivery, task bus.Task, span trace.Span, o bus.Outcome, start time.Time, log *slog.Logger) (bus.Outcome, bool) {
	o.V, o.RunID, o.Task, o.Attempt, o.Ref = bus.Version, task.RunID, task.Task, task.Attempt, task.Resource.Ref()
	o.Worker, o.Delivery, o.DurationMS = w.cfg.Name, d.Attempt, time.Since(start).Milliseconds()
	if errors.Is(context.Cause(ctx), errStopping) && o.Status == bus.TaskFailed {
		// Killed because this worker is shutting down, not because the
		// task failed: leave it to another worker of the pool.
		span.SetStatus(codes.Error, "interrupted: worker shutting down; task released for redelivery")
		span.End()
		w.metrics.finished(task.Pool, task.Resource.Type, o)
		log.Warn("task interrupted by shutdown; released for another worker")
		_ = d.Nak(0)
		return o, true
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("manifold.status", string(o.Status)), attribute.Bool("manifold.changed", o.Changed),
			attribute.Bool("manifold.refreshed", o.Refreshed))
	}
	if o.Error != "" {
		span.SetStatus(codes.Error, o.Error)
	}
	span.End()
	w.metrics.finished(task.Pool, task.Resource.Type, o)
	return o, false
}

// record stores a resource's outcome in the results bucket, then
// publishes it (into batch when not nil: see bus.OutcomeBatch), without
// waiting: the returned publications are waited for before the task is
// acked. Only outcomes whose execution must not be
// repeated are recorded: a resource that changed something or failed.
// A stable or skipped one, or any in noop mode, changed nothing: a
// redelivery checks it again, which is as cheap as a lookup and saves a
// stored message per converged resource.
func (w *Worker) record(ctx context.Context, task bus.Task, o bus.Outcome, log *slog.Logger, batch *bus.OutcomeBatch) []*bus.Pending {
	var ps []*bus.Pending
	if !o.Replayed {
		// A replayed outcome keeps the MAC of its record.
		bus.SignOutcome(&o, task.Token)
	}
	if !o.Replayed && mustRecord(task, o) {
		rec := o // on the heap for MarshalOutcome: only what is recorded
		ps = append(ps, w.bus.PutResultAsync(ctx, resultKey(task), bus.MarshalOutcome(&rec)))
	}
	if batch != nil {
		batch.Add(o)
	} else {
		ps = append(ps, w.bus.PublishOutcomeAsync(ctx, o))
	}
	lvl := slog.LevelInfo
	if o.Status == bus.TaskFailed {
		lvl = slog.LevelWarn
	}
	if log.Enabled(ctx, lvl) {
		log.Log(ctx, lvl, "task "+string(o.Status), "message", short(o.Message, 200), "error", o.Error, "duration_ms", o.DurationMS)
	}
	return ps
}

// mustRecord reports whether o, an outcome of task, is recorded for
// redeliveries.
func mustRecord(task bus.Task, o bus.Outcome) bool {
	if task.Noop {
		return false
	}
	return o.Status != bus.TaskStable && o.Status != bus.TaskSkipped
}

// progress tells the server the task is being worked on, so a live
// worker's long task is never redelivered. The returned func stops it;
// once it returned no signal is sent. A timer, not a goroutine: most
// tasks end long before the first signal is due, and a goroutine to start
// and wake at the end was a scheduling round per task.
func (w *Worker) progress(ctx context.Context, d *bus.Delivery) func() {
	every := max(w.bus.Config().TaskAckWait/3, 50*time.Millisecond)
	// The first signal a third of AckWait from now: the message was
	// fetched just before (Consumer.Next fetches one when a slot is free;
	// reserve signals while a task waits for one), and most tasks end
	// sooner, so they cost the server no signal at all.
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped || ctx.Err() != nil {
			return
		}
		_ = d.InProgress()
		t.Reset(every)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// execute runs the task through the registry and the engine.
func (w *Worker) execute(ctx context.Context, task bus.Task, log *slog.Logger) bus.Outcome {
	if !task.Deadline.IsZero() {
		if time.Now().After(task.Deadline) {
			return failOutcome("task deadline %s passed before a worker took it", task.Deadline.Format(time.RFC3339))
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, task.Deadline, fmt.Errorf("timed out after %s", task.Timeout()))
		defer cancel()
	}
	if w.assign != nil { // a task of an assignment's run: kept for its plan (plan.go)
		w.assign.collect(task)
	}
	workDir, cleanup, err := w.workDir(ctx, task)
	if err != nil {
		return failOutcome("%s: %v", task.Resource.Ref(), err)
	}
	defer cleanup()
	res, env, early := w.prepareIn(&task, workDir, log, environOf(ctx), segmentScopeOf(ctx))
	if early != nil {
		return *early
	}
	if w.assign != nil { // a task of an assignment's run: watch its paths after
		defer w.assign.executing(task)(res)
	}
	o := taskOutcome(ctx, resources.Execute(ctx, res, env))
	w.afterExecute(ctx, task, env, &o, log) // register.go: register_when_stable, the fleet view
	return o
}

func failOutcome(format string, args ...any) bus.Outcome {
	return bus.Outcome{Status: bus.TaskFailed, Error: fmt.Sprintf(format, args...)}
}

// prepare builds the resource of task and its Env, working in workDir:
// control guards, health checks, rendering, the registry. A non-nil early
// outcome (skipped by control, failed to render) ends the task without
// executing it.
func (w *Worker) prepare(task bus.Task, workDir string, log *slog.Logger) (resources.Resource, *resources.Env, *bus.Outcome) {
	return w.prepareIn(&task, workDir, log, environ(), nil)
}

// prepareIn is prepare with the process environment env (environ's map,
// shared read-only by the resources of a segment) and the segment's
// template scope (nil: one of its own).
func (w *Worker) prepareIn(task *bus.Task, workDir string, log *slog.Logger, env map[string]string, seg *segmentScope) (resources.Resource, *resources.Env, *bus.Outcome) {
	end := func(o bus.Outcome) (resources.Resource, *resources.Env, *bus.Outcome) { return nil, nil, &o }
	// file(), template() and jet() read relative to the manifest's
	// directory in the bundle.
	scope := seg.scope(template.Scope{Data: task.Data, Facts: w.facts(), Environ: env, Dir: workDir,
		Registrations: w.lookupRegistrations}) // register.go
	if c := task.Resource.Control; c != nil {
		run, why, err := control(c.If, c.Unless, scope)
		if err != nil {
			return end(failOutcome("%s: control: %v", task.Resource.Ref(), err))
		}
		if !run {
			return end(bus.Outcome{Status: bus.TaskSkipped, Message: why})
		}
	}
	checks, err := resources.ParseHealthChecks(task.Resource.HealthChecks, scope)
	if err != nil {
		return end(failOutcome("%s: health_checks: %v", task.Resource.Ref(), err))
	}
	if task.HealthCheckOnly && len(checks) == 0 {
		return end(bus.Outcome{Status: bus.TaskStable, Message: "health-check-only: resource not checked (no health checks declared)"})
	}
	spec, err := resources.RenderSpec(task.Resource, scope)
	if err != nil {
		return end(failOutcome("%v", err))
	}
	res, err := w.cfg.Registry.New(spec)
	if err != nil {
		return end(failOutcome("%v", err))
	}
	root := workDir
	if task.Entry != "" && workDir != "" {
		for d := path.Dir(task.Entry); d != "." && d != "/"; d = path.Dir(d) {
			root = filepath.Dir(root)
		}
	}
	renv := &resources.Env{Refresh: task.Refresh, Noop: task.Noop, WorkDir: workDir, Root: root, Runner: tracingRunner{w.cfg.Runner}, Logger: log,
		HealthChecks: checks, HealthCheckOnly: task.HealthCheckOnly, Data: task.Data, Facts: scope.Facts, Environ: scope.Environ,
		Assume: assumed(task)}
	return res, renv, nil
}

// taskOutcome turns the engine's outcome into a task's; a deadline's cause
// (ctx's) is named in the error.
func taskOutcome(ctx context.Context, out resources.Outcome) bus.Outcome {
	o := bus.Outcome{Status: bus.TaskStatus(out.Status), Changed: out.Changed, Refreshed: out.Refreshed,
		Message: out.Message, Diff: out.Diff}
	for _, hc := range out.HealthChecks {
		o.HealthChecks = append(o.HealthChecks, bus.HealthCheck{Name: hc.Name, Status: string(hc.Status), Output: hc.Output,
			Tries: hc.Tries, Ignored: hc.Ignored})
	}
	if out.Err != nil {
		o.Status, o.Error = bus.TaskFailed, out.Err.Error()
		if cause := context.Cause(ctx); cause != nil && errors.Is(out.Err, context.DeadlineExceeded) {
			o.Error = cause.Error() + ": " + o.Error
		}
	}
	return o
}

// control evaluates CCM's control guards: the resource runs when `if` is
// true (or empty) and `unless` is false (or empty). Each is an expr-lang
// expression, bare or in template braces.
func control(ifExpr, unlessExpr string, scope template.Scope) (bool, string, error) {
	eval := func(name, expr string) (bool, error) {
		if !template.HasTemplate(expr) {
			expr = "{{ " + expr + " }}"
		}
		v, err := template.Render(expr, scope)
		if err != nil {
			return false, fmt.Errorf("%s: %w", name, err)
		}
		b, ok := v.(bool)
		if !ok {
			return false, fmt.Errorf("%s: %q gave %T %v, want a bool", name, expr, v, v)
		}
		return b, nil
	}
	if ifExpr != "" {
		ok, err := eval("if", ifExpr)
		if err != nil || !ok {
			return false, "skipped: control if is false", err
		}
	}
	if unlessExpr != "" {
		ok, err := eval("unless", unlessExpr)
		if err != nil || ok {
			return false, "skipped: control unless is true", err
		}
	}
	return true, "", nil
}

type environKey struct{}

// segmentScope is the template scope the resources of one segment render
// over (template.Scope.Reusable): the expression environment is made once
// and each expression of immutable value evaluated once for the segment,
// not once per resource (4.5 µs and 24 allocations per resource of
// e2e/bench's files, 0.9 µs and 5 over a reusable scope:
// BenchmarkRenderSpec), while each resource's evaluation gets a budget of
// its own (Rearm). It serves while the resources' data, facts,
// environment and directory are the same maps and directory as the
// first's, and starts again otherwise. A segment's resources are prepared
// one after another, never at once.
type segmentScope struct {
	data, facts, environ unsafe.Pointer
	dir                  string
	made                 bool
	reused               template.Scope
}

// scope returns the segment's scope for a resource whose own would be
// base; base itself when c is nil (a task alone).
func (c *segmentScope) scope(base template.Scope) template.Scope {
	if c == nil {
		return base
	}
	data, facts, env := mapPointer(base.Data), mapPointer(base.Facts), mapPointer(base.Environ)
	if c.made && c.data == data && c.facts == facts && c.environ == env && c.dir == base.Dir {
		return c.reused.Rearm()
	}
	*c = segmentScope{data: data, facts: facts, environ: env, dir: base.Dir, made: true, reused: base.Reusable()}
	return c.reused
}

// mapPointer is m's identity (nil for a nil map).
func mapPointer[M ~map[K]V, K comparable, V any](m M) unsafe.Pointer {
	return reflect.ValueOf(m).UnsafePointer()
}

type segmentScopeKey struct{}

// withSegmentScope returns ctx carrying a template scope for the resources
// of one segment.
func withSegmentScope(ctx context.Context) context.Context {
	return context.WithValue(ctx, segmentScopeKey{}, &segmentScope{})
}

// segmentScopeOf returns ctx's segment scope, nil when there is none.
func segmentScopeOf(ctx context.Context) *segmentScope {
	c, _ := ctx.Value(segmentScopeKey{}).(*segmentScope)
	return c
}

// withEnviron returns ctx carrying env, the process environment as environ
// returns it, for the resources of one task.
func withEnviron(ctx context.Context, env map[string]string) context.Context {
	return context.WithValue(ctx, environKey{}, env)
}

// environOf returns ctx's environment (withEnviron), else a fresh one.
func environOf(ctx context.Context) map[string]string {
	if env, ok := ctx.Value(environKey{}).(map[string]string); ok {
		return env
	}
	return environ()
}

// environ returns the process environment as a map. Nothing writes the
// map: the resources of a segment share one.
func environ() map[string]string {
	env := os.Environ()
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

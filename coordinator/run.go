package coordinator

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/schemas"
)

// maxOutcomeBatch caps how many outcomes are folded into one record write.
const maxOutcomeBatch = 256

// run drives one run. Only its own goroutine touches it.
type run struct {
	c    *Coordinator
	rec  *record
	rev  uint64
	plan *Plan
	log  *slog.Logger

	span  trace.Span
	spans map[int]trace.Span

	// Work of the current step, flushed after the record is written.
	tasks      []bus.Task
	pendingCtx []context.Context // trace context of each task in tasks
	events     []bus.Event
}

// drive takes the run from queued to its end. With resume it continues a
// run another coordinator left: tasks it had dispatched are published
// again under the same message ID (the stream drops duplicates; a worker
// answers a finished one from its record).
func (r *run) drive(ctx, traceCtx context.Context, resume bool) {
	rec := r.rec
	name := "run " + rec.Manifest
	if resume {
		name += " (resumed)"
	}
	spanCtx, span := r.c.tracer.Start(traceCtx, name, trace.WithAttributes(
		attribute.String("manifold.run_id", rec.RunID),
		attribute.String("manifold.root_run_id", rec.RootRunID),
		attribute.String("manifold.parent_run_id", rec.ParentRunID),
		attribute.Int("manifold.depth", rec.Depth),
		attribute.String("manifold.manifest", rec.Manifest),
		attribute.Bool("manifold.noop", rec.Request.Noop),
		attribute.Bool("manifold.health_check_only", rec.Request.HealthCheckOnly),
		attribute.String("manifold.pool", rec.Request.Pool),
	))
	r.span, r.spans = span, map[int]trace.Span{}
	defer func() {
		for _, s := range r.spans {
			s.End()
		}
		span.End()
	}()
	if rec.TraceID == "" {
		rec.TraceID = span.SpanContext().TraceID().String()
		rec.SpanID = span.SpanContext().SpanID().String()
	}
	r.log = r.log.With("trace_id", span.SpanContext().TraceID().String(), "span_id", span.SpanContext().SpanID().String())

	plan, err := r.load(ctx)
	if err != nil {
		r.finishRejected(ctx, err)
		return
	}
	r.plan = plan
	if fresh := rec.Status == RunQueued || len(rec.Tasks) != len(plan.Manifest.Resources); fresh {
		rec.Status, rec.StartedAt = RunRunning, time.Now().UTC()
		rec.Tasks = make([]*taskState, len(plan.Manifest.Resources))
		for i, res := range plan.Manifest.Resources {
			rec.Tasks[i] = &taskState{Ref: res.Ref(), Type: res.Type, Name: res.Name, Alias: res.Alias,
				Pool: cmp.Or(res.Target, rec.Request.Pool), Status: bus.TaskPending}
			if rec.Request.PinWorker != "" {
				rec.Tasks[i].Pool = bus.PinnedPool(rec.Request.PinWorker)
			}
		}
		r.events = append(r.events, bus.Event{Kind: bus.EventRunStarted, Total: len(rec.Tasks)})
		r.log.Info("run started", "resources", len(rec.Tasks), "noop", rec.Request.Noop)
	} else {
		r.redispatch(ctx, spanCtx)
	}

	outcomes, err := r.c.bus.OutcomeConsumer(ctx, rec.RunID)
	if err != nil {
		r.log.Error("run: no outcome consumer; another coordinator can resume it", "error", err)
		return
	}
	deliveries := make(chan *bus.Delivery)
	pullCtx, stopPull := context.WithCancel(ctx)
	defer stopPull()
	go func() {
		for {
			d, err := outcomes.Next(pullCtx)
			if err != nil {
				return
			}
			select {
			case deliveries <- d:
			case <-pullCtx.Done():
				return
			}
		}
	}()

	r.schedule(spanCtx)
	if !r.commit(ctx) {
		return
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	wake := r.c.driving.wakeup(rec.RunID)
	for !r.done() {
		timer.Reset(r.nextDeadline())
		var acks []*bus.Delivery
		select {
		case <-wake: // cancelled elsewhere: the next write finds out
		case <-ctx.Done():
			r.handOff()
			return
		case d := <-deliveries:
			acks = append(acks, d)
			r.handleOutcome(d)
		drain:
			for len(acks) < maxOutcomeBatch {
				select {
				case d := <-deliveries:
					acks = append(acks, d)
					r.handleOutcome(d)
				default:
					break drain
				}
			}
		case <-timer.C:
			r.expire(time.Now())
		}
		r.schedule(spanCtx)
		if !r.commit(ctx) {
			return
		}
		for _, d := range acks {
			if err := d.Ack(ctx); err != nil {
				r.log.Warn("outcome ack failed; a redelivery is dropped as stale", "error", err)
			}
		}
	}
	r.finish(ctx)
}

// load reads the manifest of the request (inline or from its bundle),
// enforces allow_apply for child runs and prepares the plan.
func (r *run) load(ctx context.Context) (*Plan, error) {
	rec, req := r.rec, r.rec.Request
	if req.EachWorker {
		return r.fanOutPlan(ctx)
	}
	var src []byte
	name := rec.Manifest
	switch {
	case req.Bundle != "":
		b, err := r.c.bundle(ctx, req.Bundle)
		if err != nil {
			return nil, err
		}
		if src, err = b.Read(r.entry()); err != nil {
			return nil, fmt.Errorf("bundle %s: %w", req.Bundle, err)
		}
		if rec.ParentRunID != "" || req.ManifestName == "" {
			name = r.entry()
		}
	case req.ManifestYAML != "":
		src = []byte(req.ManifestYAML)
	default:
		return nil, errors.New("run request carries no manifest: set manifest_yaml or bundle")
	}
	m, err := schemas.ParseUnchecked(name, src)
	if err != nil {
		return nil, err
	}
	if rec.DenyApply {
		var applies []string
		for _, res := range m.Resources {
			if res.Type == "apply" {
				applies = append(applies, res.Ref()+" ("+res.Pos.String()+")")
			}
		}
		if err := denyApplies(applies); err != nil {
			return nil, err
		}
	}
	return PrepareWith(m, PrepareOpts{ApplyData: rec.ApplyData, Overrides: req.Data, External: func(ref string) bool {
		_, ok := rec.Session[ref]
		return ok
	}})
}

// schedule moves pending tasks on: skips those whose requirements failed,
// dispatches the ready ones. It loops because a skip can make another task
// ready.
func (r *run) schedule(ctx context.Context) {
	for progress := true; progress; {
		progress = false
		for i, t := range r.rec.Tasks {
			if t.Status != bus.TaskPending || !r.ready(i) {
				continue
			}
			progress = true
			if reason := r.skipReason(i); reason != "" {
				r.settle(i, bus.TaskSkipped, reason, "")
				continue
			}
			r.dispatch(ctx, i)
		}
	}
}

// ready reports whether every task i waits for has ended.
func (r *run) ready(i int) bool {
	p := r.plan
	if a := p.After[i]; a >= 0 && !r.rec.Tasks[a].Status.Final() {
		return false
	}
	for _, deps := range [][]int{p.Requires[i], p.Subscribes[i]} {
		for _, j := range deps {
			if !r.rec.Tasks[j].Status.Final() {
				return false
			}
		}
	}
	return true
}

// skipReason says why a ready task must not run, or "".
func (r *run) skipReason(i int) string {
	if r.rec.Stopped {
		return "not run: fail_on_error stopped the run after a failure"
	}
	status := func(ref string, s bus.TaskStatus) string {
		switch s {
		case bus.TaskFailed:
			return "skipped: " + ref + " failed"
		case bus.TaskSkipped, bus.TaskCancelled:
			return "skipped: " + ref + " was skipped"
		}
		return ""
	}
	for _, deps := range [][]int{r.plan.Requires[i], r.plan.Subscribes[i]} {
		for _, j := range deps {
			if why := status(r.rec.Tasks[j].Ref, r.rec.Tasks[j].Status); why != "" {
				return why
			}
		}
	}
	for _, ref := range r.plan.External[i] {
		if why := status(ref, r.rec.Session[ref].Status); why != "" {
			return why
		}
	}
	return ""
}

// dispatch queues task i for publication after the next commit.
func (r *run) dispatch(ctx context.Context, i int) {
	rec, t := r.rec, r.rec.Tasks[i]
	res := r.plan.Manifest.Resources[i]
	refresh := false
	for _, j := range r.plan.Subscribes[i] {
		refresh = refresh || rec.Tasks[j].Changed
	}
	for _, ref := range r.plan.ExternalSubscribes[i] {
		refresh = refresh || rec.Session[ref].Changed
	}
	timeout := r.timeout(i)
	t.Attempt++
	t.Status = bus.TaskDispatched
	t.Refreshed = refresh
	t.Deadline = time.Now().Add(timeout).UTC()
	spanCtx, span := r.c.tracer.Start(ctx, "resource "+t.Ref, trace.WithAttributes(
		attribute.String("manifold.run_id", rec.RunID),
		attribute.String("manifold.resource.ref", t.Ref),
		attribute.String("manifold.resource.type", t.Type),
		attribute.String("manifold.resource.name", t.Name),
		attribute.Int("manifold.attempt", t.Attempt),
		attribute.String("manifold.pool", t.Pool),
	))
	if old := r.spans[i]; old != nil {
		old.End()
	}
	r.spans[i] = span
	r.events = append(r.events, bus.Event{Kind: bus.EventTaskDispatched, Task: &i, Ref: t.Ref})
	if res.Type == "apply" {
		// The child run's own tasks have deadlines; the apply waits for
		// the child, however long it takes.
		t.Deadline = time.Time{}
		r.startApply(ctx, spanCtx, i)
		return
	}
	r.tasks = append(r.tasks, r.task(i))
	r.pendingCtx = append(r.pendingCtx, spanCtx)
}

// timeout is task i's execution bound: its own, the request's, or the
// coordinator's default.
func (r *run) timeout(i int) time.Duration {
	if d := r.plan.Manifest.Resources[i].Timeout; d > 0 {
		return d
	}
	return cmp.Or(time.Duration(r.rec.Request.TaskTimeoutMS)*time.Millisecond, r.c.cfg.TaskTimeout)
}

// task builds the message of task i's current attempt.
func (r *run) task(i int) bus.Task {
	rec, t := r.rec, r.rec.Tasks[i]
	task := bus.Task{
		RunID: rec.RunID, RootRunID: rec.RootRunID, Task: i, Attempt: t.Attempt, Manifest: rec.Manifest,
		Resource: r.plan.Manifest.Resources[i], Data: r.plan.Data, Noop: rec.Request.Noop,
		HealthCheckOnly: rec.Request.HealthCheckOnly, Refresh: t.Refreshed, Pool: t.Pool,
		TimeoutMS: r.timeout(i).Milliseconds(), Deadline: t.Deadline, Bundle: rec.Request.Bundle, Entry: r.entry(),
	}
	if rec.Request.WorkDir != "" {
		task.WorkDir = rec.Request.WorkDir
		if rec.Request.Bundle != "" {
			task.WorkDir = filepath.Join(rec.Request.WorkDir, filepath.FromSlash(path.Dir(r.entry())))
		}
	}
	return task
}

// redispatch, on resume, publishes again the tasks the previous owner had
// dispatched (same message IDs), and restarts child runs it had not
// recorded yet.
func (r *run) redispatch(ctx, spanCtx context.Context) {
	for i, t := range r.rec.Tasks {
		if t.Status != bus.TaskDispatched && t.Status != bus.TaskRunning {
			continue
		}
		taskCtx, span := r.c.tracer.Start(spanCtx, "resource "+t.Ref, trace.WithAttributes(
			attribute.String("manifold.run_id", r.rec.RunID), attribute.String("manifold.resource.ref", t.Ref),
			attribute.Int("manifold.attempt", t.Attempt), attribute.Bool("manifold.resumed", true)))
		r.spans[i] = span
		if t.Type == "apply" {
			if t.Child != "" {
				if _, _, err := loadRecord(ctx, r.c.bus.Runs(), t.Child); err == nil {
					continue // the child run is there; its outcome will come
				}
			}
			r.startApply(ctx, taskCtx, i)
			continue
		}
		r.tasks = append(r.tasks, r.task(i))
		r.pendingCtx = append(r.pendingCtx, taskCtx)
	}
}

// handOff releases the run's lease when this coordinator stops, so a
// standby resumes it at once instead of after the lease lapses.
func (r *run) handOff() {
	r.rec.LeaseUntil = time.Now().UTC()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	data, err := json.Marshal(r.rec)
	if err == nil {
		_, err = r.c.bus.Runs().Update(ctx, runKey(r.rec.RunID), data, r.rev)
	}
	if err != nil {
		r.log.Info("run left unfinished; another coordinator resumes it when its lease lapses", "error", err)
		return
	}
	r.log.Info("run handed off: coordinator stopping; another coordinator resumes it")
}

// handleOutcome folds one outcome delivery into the record. Stale outcomes
// (an earlier attempt, a task already settled) are dropped.
func (r *run) handleOutcome(d *bus.Delivery) {
	var o bus.Outcome
	if err := bus.Decode(d.Data(), &o); err != nil {
		r.log.Warn("outcome dropped: unreadable", "error", err)
		return
	}
	if o.RunID != r.rec.RunID || o.Task < 0 || o.Task >= len(r.rec.Tasks) {
		r.log.Warn("outcome dropped: not of this run", "outcome_run", o.RunID, "task", o.Task)
		return
	}
	t := r.rec.Tasks[o.Task]
	// Only a task waiting for its outcome takes one: a pending task (never
	// dispatched, or failed and waiting for its retry) has no current
	// attempt, and a settled one has had its answer.
	if (t.Status != bus.TaskDispatched && t.Status != bus.TaskRunning) || o.Attempt != t.Attempt {
		r.log.Debug("stale outcome dropped", "resource", t.Ref, "attempt", o.Attempt, "current", t.Attempt)
		return
	}
	t.Worker, t.DurationMS, t.Changed = o.Worker, o.DurationMS, o.Changed
	t.Refreshed = o.Refreshed
	status := o.Status
	switch status {
	case bus.TaskChanged, bus.TaskStable, bus.TaskSkipped:
	case bus.TaskFailed:
		if res := r.plan.Manifest.Resources[o.Task]; t.Attempt <= res.Retry {
			r.log.Info("resource failed, retrying", "resource", t.Ref, "attempt", t.Attempt, "error", o.Error)
			r.endSpan(o.Task, o.Error)
			t.Status = bus.TaskPending // schedule dispatches the next attempt
			return
		}
	default:
		status, o.Error = bus.TaskFailed, fmt.Sprintf("worker reported unknown status %q", o.Status)
	}
	r.settle(o.Task, status, o.Message, o.Error)
}

// settle ends task i with status, recording what happened.
func (r *run) settle(i int, status bus.TaskStatus, message, errText string) {
	t := r.rec.Tasks[i]
	t.Status, t.Message, t.Error = status, message, errText
	if status != bus.TaskChanged {
		t.Changed = false
	}
	if status == bus.TaskFailed && r.plan.Manifest.FailOnError {
		r.rec.Stopped = true
	}
	r.endSpan(i, errText)
	r.c.metrics.taskEnded(t.Type, status)
	done := 0
	for _, x := range r.rec.Tasks {
		if x.Status.Final() {
			done++
		}
	}
	r.events = append(r.events, bus.Event{Kind: bus.EventTaskFinished, Task: &i, Ref: t.Ref, Status: string(status),
		Outcome: status, Message: message, Error: errText, Worker: t.Worker, DurationMS: t.DurationMS,
		Done: done, Total: len(r.rec.Tasks)})
	level := slog.LevelInfo
	if status == bus.TaskFailed {
		level = slog.LevelWarn
	}
	r.log.Log(context.Background(), level, "resource "+string(status), "resource", t.Ref, "message", message, "error", errText, "worker", t.Worker)
}

func (r *run) endSpan(i int, errText string) {
	span := r.spans[i]
	if span == nil {
		return
	}
	t := r.rec.Tasks[i]
	span.SetAttributes(attribute.String("manifold.status", string(t.Status)), attribute.Bool("manifold.changed", t.Changed),
		attribute.Bool("manifold.refreshed", t.Refreshed), attribute.String("manifold.worker", t.Worker))
	if errText != "" {
		span.SetStatus(codes.Error, errText)
	}
	span.End()
	delete(r.spans, i)
}

// expire fails dispatched tasks whose deadline (plus grace for the worker's
// own timeout outcome) has passed.
func (r *run) expire(now time.Time) {
	for i, t := range r.rec.Tasks {
		if (t.Status == bus.TaskDispatched || t.Status == bus.TaskRunning) && !t.Deadline.IsZero() && now.After(t.Deadline.Add(r.c.cfg.OutcomeGrace)) {
			r.settle(i, bus.TaskFailed, "", fmt.Sprintf("no outcome by the task deadline %s: no worker of pool %q finished it in time",
				t.Deadline.Format(time.RFC3339), t.Pool))
		}
	}
}

// nextDeadline returns how long until the earliest task deadline (plus
// grace) passes.
func (r *run) nextDeadline() time.Duration {
	next := r.c.cfg.Lease / 3 // renew the lease at least this often
	for _, t := range r.rec.Tasks {
		if (t.Status == bus.TaskDispatched || t.Status == bus.TaskRunning) && !t.Deadline.IsZero() {
			next = min(next, time.Until(t.Deadline.Add(r.c.cfg.OutcomeGrace)))
		}
	}
	return max(next, time.Millisecond)
}

func (r *run) done() bool {
	for _, t := range r.rec.Tasks {
		if !t.Status.Final() {
			return false
		}
	}
	return true
}

// commit writes the record (compare and swap), then publishes the tasks and
// events of the step. It returns false when the run must be left: the
// record could not be written, or another coordinator owns it now.
func (r *run) commit(ctx context.Context) bool {
	if err := r.write(ctx); err != nil {
		r.leave(ctx, err)
		return false
	}
	for k, task := range r.tasks {
		if err := r.c.bus.PublishTask(r.pendingCtx[k], task); err != nil {
			// The record says dispatched: the deadline fails the task if the
			// publication is lost for good.
			r.log.Error("task not published", "resource", task.Resource.Ref(), "error", err)
		}
	}
	for _, ev := range r.events {
		r.c.event(ctx, r.rec, ev)
	}
	r.tasks, r.pendingCtx, r.events = r.tasks[:0], r.pendingCtx[:0], r.events[:0]
	return true
}

// leave stops driving the run after its record could not be written,
// saying why: it was cancelled, another coordinator took it over, or the
// bus failed (then the lease lapses and a coordinator resumes it).
func (r *run) leave(ctx context.Context, err error) {
	if !errors.Is(err, bus.ErrRevisionMismatch) {
		r.log.Error("run record not written; leaving the run for recovery", "error", err)
		return
	}
	rec, _, lerr := loadRecord(ctx, r.c.bus.Runs(), r.rec.RunID)
	switch {
	case lerr != nil:
		r.log.Error("run record changed under this coordinator and cannot be read", "error", lerr)
	case rec.Status == RunCancelled:
		r.log.Info("run cancelled: stopped driving it")
		r.span.SetAttributes(attribute.String("manifold.status", string(RunCancelled)))
		if derr := r.c.bus.DeleteOutcomeConsumer(context.WithoutCancel(ctx), rec.RunID); derr != nil {
			r.log.Warn("outcome consumer not removed (it expires when idle)", "error", derr)
		}
		r.deactivate(ctx)
	default:
		r.log.Info("run taken over by another coordinator", "owner", rec.Owner)
	}
}

// writeRetryDelay is the pause between attempts of a run record write
// that got no answer.
const writeRetryDelay = 200 * time.Millisecond

func (r *run) write(ctx context.Context) error {
	held := r.rec.LeaseUntil // the claim this write renews
	r.rec.LeaseUntil = time.Now().Add(r.c.cfg.Lease).UTC()
	data, err := json.Marshal(r.rec)
	if err != nil {
		return err
	}
	for {
		rev, err := r.c.bus.Runs().Update(ctx, runKey(r.rec.RunID), data, r.rev)
		if err == nil {
			r.rev = rev
			return nil
		}
		// A cluster that lost a node answers nothing while it elects a
		// stream leader: try again while the claim holds. A revision
		// mismatch is final (another owner, or a write whose reply was
		// lost landed: recovery resumes the run).
		if errors.Is(err, bus.ErrRevisionMismatch) || time.Now().Add(writeRetryDelay).After(held) {
			return err
		}
		r.log.Warn("run record not written, retrying", "error", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(writeRetryDelay):
		}
	}
}

// finish ends a run whose tasks have all ended.
func (r *run) finish(ctx context.Context) {
	rec := r.rec
	rec.Status, rec.FinishedAt = RunSucceeded, time.Now().UTC()
	failed := 0
	for _, t := range rec.Tasks {
		if t.Status == bus.TaskFailed {
			failed++
		}
	}
	if failed > 0 {
		rec.Status = RunFailed
		rec.Error = fmt.Sprintf("%d of %d resources failed", failed, len(rec.Tasks))
		r.span.SetStatus(codes.Error, rec.Error)
	}
	r.span.SetAttributes(attribute.String("manifold.status", string(rec.Status)))
	r.c.metrics.runEnded(rec.Status)
	rep := rec.report()
	r.events = append(r.events, bus.Event{Kind: bus.EventRunFinished, Status: string(rec.Status), Error: rec.Error,
		Done: rep.Counts.Total, Total: rep.Counts.Total, DurationMS: rep.DurationMS})
	if !r.commit(ctx) {
		return
	}
	// End the run span before the parent hears of it (and ends its apply
	// resource's span), so the child never outlasts its parent in a trace.
	// Ending again on return is a no-op.
	r.span.End()
	r.reportToParent(ctx, nil)
	r.deactivate(ctx)
	if err := r.c.bus.DeleteOutcomeConsumer(context.WithoutCancel(ctx), rec.RunID); err != nil {
		r.log.Warn("outcome consumer not removed (it expires when idle)", "error", err)
	}
	r.log.Info("run finished", "status", rec.Status, "changed", rep.Counts.Changed, "failed", rep.Counts.Failed,
		"skipped", rep.Counts.Skipped, "duration_ms", rep.DurationMS)
}

// finishRejected ends a run whose manifest could not be loaded or planned.
func (r *run) finishRejected(ctx context.Context, err error) {
	rec := r.rec
	msg := err.Error()
	rec.Status, rec.Error, rec.StartedAt, rec.FinishedAt = RunFailed, msg, time.Now().UTC(), time.Now().UTC()
	r.span.SetStatus(codes.Error, msg)
	r.c.metrics.runEnded(RunFailed)
	r.log.Warn("run rejected", "error", strings.ReplaceAll(msg, "\n", "; "))
	r.events = append(r.events, bus.Event{Kind: bus.EventRunRejected, Error: msg},
		bus.Event{Kind: bus.EventRunFinished, Status: string(RunFailed), Error: msg})
	if r.commit(ctx) {
		r.span.End()
		r.reportToParent(ctx, err)
		r.deactivate(ctx)
	}
}

// deactivate removes the run's mark of an unfinished run.
func (r *run) deactivate(ctx context.Context) {
	if err := r.c.bus.Runs().Delete(context.WithoutCancel(ctx), activeKey(r.rec.RunID)); err != nil {
		r.log.Warn("active mark not removed; coordinators will skip the finished run", "error", err)
	}
}

package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/template"
)

// resultKey is where a task attempt's outcome is recorded.
func resultKey(t bus.Task) string {
	return t.RunID + "." + strconv.Itoa(t.Task) + "." + strconv.Itoa(t.Attempt)
}

// handle executes one delivered task and answers it: outcome recorded,
// then published, then the task acked. A task whose outcome was recorded
// by an earlier delivery is answered from the record without executing.
func (w *Worker) handle(ctx context.Context, d *bus.Delivery) {
	var task bus.Task
	if err := bus.Decode(d.Data(), &task); err != nil {
		w.log.Error("task dropped: unreadable", "subject", d.Subject(), "error", err)
		_ = d.Term(err.Error())
		return
	}
	ref := task.Resource.Ref()
	log := w.log.With("run_id", task.RunID, "resource", ref, "manifest", task.Manifest, "attempt", task.Attempt, "delivery", d.Attempt)
	final := context.WithoutCancel(ctx)
	key := resultKey(task)

	if !w.claim(task.MsgID(), ref) {
		// Not acked, not nak'd: the running delivery's ack settles the
		// message, or a later redelivery is answered from the record.
		log.Warn("redelivered task is still running on this worker; not run twice")
		return
	}
	defer w.track(task.MsgID(), ref, false)

	if e, err := w.bus.Results().Get(ctx, key); err == nil {
		var o bus.Outcome
		if json.Unmarshal(e.Value, &o) == nil {
			o.Replayed, o.Delivery = true, d.Attempt
			log.Info("redelivered task answered from its recorded outcome", "status", o.Status)
			w.answer(final, d, o, log)
			return
		}
	}

	w.metrics.started(task.Pool, d.Attempt)
	stopProgress := w.progress(ctx, d)
	spanCtx, span := w.tracer.Start(d.Ctx, "execute "+ref, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("manifold.run_id", task.RunID),
		attribute.String("manifold.root_run_id", task.RootRunID),
		attribute.String("manifold.resource.ref", ref),
		attribute.String("manifold.resource.type", task.Resource.Type),
		attribute.String("manifold.resource.name", task.Resource.Name),
		attribute.String("manifold.manifest", task.Manifest),
		attribute.Int("manifold.attempt", task.Attempt),
		attribute.Int("manifold.delivery", d.Attempt),
		attribute.Bool("manifold.noop", task.Noop),
		attribute.String("manifold.worker", w.cfg.Name),
		attribute.String("manifold.pool", task.Pool),
	))
	log = log.With("trace_id", span.SpanContext().TraceID().String(), "span_id", span.SpanContext().SpanID().String())
	start := time.Now()
	execCtx, cancel := context.WithCancelCause(ctx)
	untrack := w.trackCancel(task.RunID, task.MsgID(), cancel)
	o := w.execute(trace.ContextWithSpan(execCtx, span), task, log)
	untrack()
	cancel(nil)
	_ = spanCtx
	stopProgress()
	o.V, o.RunID, o.Task, o.Attempt, o.Ref = bus.Version, task.RunID, task.Task, task.Attempt, ref
	o.Worker, o.Delivery, o.DurationMS = w.cfg.Name, d.Attempt, time.Since(start).Milliseconds()
	if errors.Is(context.Cause(ctx), errStopping) && o.Status == bus.TaskFailed {
		// Killed because this worker is shutting down, not because the
		// task failed: leave it to another worker of the pool.
		span.SetStatus(codes.Error, "interrupted: worker shutting down; task released for redelivery")
		span.End()
		w.metrics.finished(task.Pool, task.Resource.Type, o)
		log.Warn("task interrupted by shutdown; released for another worker")
		_ = d.Nak(0)
		return
	}
	span.SetAttributes(attribute.String("manifold.status", string(o.Status)), attribute.Bool("manifold.changed", o.Changed),
		attribute.Bool("manifold.refreshed", o.Refreshed))
	if o.Error != "" {
		span.SetStatus(codes.Error, o.Error)
	}
	span.End()
	w.metrics.finished(task.Pool, task.Resource.Type, o)

	if data, err := json.Marshal(o); err == nil {
		if _, err := w.bus.Results().Put(final, key, data); err != nil {
			log.Warn("outcome not recorded; a redelivery would run the task again", "error", err)
		}
	}
	w.answer(final, d, o, log)
}

// answer publishes the outcome and acks the task once the outcome is
// durable; if publishing fails the task is left unacked for redelivery.
func (w *Worker) answer(ctx context.Context, d *bus.Delivery, o bus.Outcome, log *slog.Logger) {
	if err := w.bus.PublishOutcome(ctx, o); err != nil {
		log.Error("outcome not published; the task will be redelivered", "error", err)
		_ = d.Nak(time.Second)
		return
	}
	if err := d.Ack(ctx); err != nil {
		log.Warn("task ack failed; the redelivery is answered from the record", "error", err)
	}
	lvl := slog.LevelInfo
	if o.Status == bus.TaskFailed {
		lvl = slog.LevelWarn
	}
	log.Log(ctx, lvl, "task "+string(o.Status), "message", short(o.Message, 200), "error", o.Error, "duration_ms", o.DurationMS)
}

// progress tells the server the task is being worked on, so a live
// worker's long task is never redelivered. The returned func stops it.
func (w *Worker) progress(ctx context.Context, d *bus.Delivery) func() {
	every := max(w.bus.Config().TaskAckWait/3, 50*time.Millisecond)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	// At once too: the AckWait clock has run since the server delivered
	// the message, not since the work started.
	_ = d.InProgress()
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = d.InProgress()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// execute runs the task through the registry and the engine.
func (w *Worker) execute(ctx context.Context, task bus.Task, log *slog.Logger) bus.Outcome {
	fail := func(format string, args ...any) bus.Outcome {
		return bus.Outcome{Status: bus.TaskFailed, Error: fmt.Sprintf(format, args...)}
	}
	ref := task.Resource.Ref()
	if !task.Deadline.IsZero() {
		if time.Now().After(task.Deadline) {
			return fail("task deadline %s passed before a worker took it", task.Deadline.Format(time.RFC3339))
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, task.Deadline, fmt.Errorf("timed out after %s", task.Timeout()))
		defer cancel()
	}
	scope := template.Scope{Data: task.Data, Facts: w.cfg.Facts, Environ: environ()}
	if c := task.Resource.Control; c != nil {
		run, why, err := control(c.If, c.Unless, scope)
		if err != nil {
			return fail("%s: control: %v", ref, err)
		}
		if !run {
			return bus.Outcome{Status: bus.TaskSkipped, Message: why}
		}
	}
	if task.HealthCheckOnly {
		return bus.Outcome{Status: bus.TaskStable, Message: "health-check-only: resource not checked (no health checks declared)"}
	}
	spec, err := resources.RenderSpec(task.Resource, scope)
	if err != nil {
		return fail("%v", err)
	}
	res, err := w.cfg.Registry.New(spec)
	if err != nil {
		return fail("%v", err)
	}
	workDir, cleanup, err := w.workDir(ctx, task)
	if err != nil {
		return fail("%s: %v", ref, err)
	}
	defer cleanup()
	env := &resources.Env{Refresh: task.Refresh, Noop: task.Noop, WorkDir: workDir, Runner: tracingRunner{w.cfg.Runner}, Logger: log}
	out := resources.Execute(ctx, res, env)
	o := bus.Outcome{Status: bus.TaskStatus(out.Status), Changed: out.Changed, Refreshed: out.Refreshed,
		Message: out.Message, Diff: out.Diff}
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

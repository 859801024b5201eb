package coordinator

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/internal/compile"
	"github.com/manifold-run/manifold/schemas"
)

// maxFactBatch caps how many history facts are folded before the loop
// carries out their commands.
const maxFactBatch = 256

// run drives one run: the IO loop around its state machine. Only its own
// goroutine touches it.
type run struct {
	c    *Coordinator
	rec  *record
	rev  uint64
	plan *Plan
	// prepared is the plan the run's submission was checked with (a root
	// run submitted through the API, see api.submit): load takes it.
	prepared *Plan
	m        *machine
	log      *slog.Logger

	span  trace.Span
	spans []trace.Span // by task: its current attempt's span, while it runs (nil: none)

	// session is the ancestors' finished resources (record.Session, or
	// the object record.SessionRef names).
	session map[string]sessionRef

	deadlines deadlineHeap
	// pending are task publications awaiting the stream's ack.
	pending []pendingTask
	// outbox are the events of the step, published after its tasks
	// (sendEvents).
	outbox []queuedEvent
	// eventsRead are the event kinds anyone reads of the run, nil for
	// all (Config.EventsRead), once eventsKnown (taskEventRead).
	eventsRead  []bus.EventKind
	eventsKnown bool
	// replaying is true while the history written before this coordinator
	// took the run is folded: its commands were carried out already.
	replaying bool

	// children are the apply tasks whose child run is in progress.
	children map[int]bool
	// waiting are apply tasks whose child run waits for a slot of the
	// run tree (Config.MaxTreeLiveRuns), in order; treeWake is told when a
	// slot may be free (unwatch stops that).
	waiting  []int
	treeWake chan struct{}
	unwatch  func()

	// subs are the subscribers of each resource (see subscribers).
	subs [][]string
	// assume indexes what a noop run's resources would create (see
	// assumeOf); built at the first noop task.
	assume *assumptions
	// hostFacts are a fan-out's targets' facts as read when they were
	// chosen (fanout.go); a resumed run reads them again.
	hostFacts map[string]map[string]any
	// tokens are the tokens of the task attempts this coordinator
	// dispatched and has no outcome of yet, kept from signing their
	// message so that checking the outcome does not derive them again.
	tokens map[taskAttempt]string
}

// taskAttempt names one attempt of a task.
type taskAttempt struct{ task, attempt int }

type pendingTask struct {
	task bus.Task
	ctx  context.Context
	p    *bus.Pending
}

// drive takes the run from queued to its end. With resume it continues a
// run another coordinator left: it replays the run's history into a fresh
// state machine, then publishes again the tasks still in flight under the
// same message IDs (the stream drops duplicates; a worker answers a
// finished one from its record).
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
		attribute.String("manifold.trigger", rec.Request.Trigger),
		attribute.String("manifold.assignment", rec.Request.Assignment),
	))
	r.span, r.children = span, map[int]bool{}
	defer func() {
		for _, s := range r.spans {
			if s != nil {
				s.End()
			}
		}
		span.End()
		if r.unwatch != nil {
			r.unwatch()
		}
	}()
	if rec.TraceID == "" {
		rec.TraceID = span.SpanContext().TraceID().String()
		rec.SpanID = span.SpanContext().SpanID().String()
	}
	r.log = r.log.With("trace_id", span.SpanContext().TraceID().String(), "span_id", span.SpanContext().SpanID().String())

	var err error
	if r.session, err = loadSession(ctx, r.c.bus, rec); err != nil {
		r.finishRejected(ctx, err)
		return
	}
	plan, err := r.load(ctx)
	if err != nil {
		r.finishRejected(ctx, err)
		return
	}
	r.plan = plan
	if !resume || rec.Status == RunQueued {
		rec.Spread = r.c.spreadOf(ctx, rec, plan)
	}
	r.m = newRunMachine(rec, r.session, plan)

	hist, err := r.c.histories.Open(ctx, rec.RunID)
	if err != nil {
		r.log.Error("run: history not readable; another coordinator can resume it", "error", err)
		return
	}
	defer hist.Stop()

	r.replaying = resume
	if !resume || rec.Status == RunQueued {
		rec.Status, rec.StartedAt = RunRunning, time.Now().UTC()
		rec.Counts = r.m.counts
		if err := r.write(ctx); err != nil {
			r.leave(ctx, err)
			return
		}
		r.c.event(ctx, rec, bus.Event{Kind: bus.EventRunStarted, Total: len(plan.Manifest.Resources)})
		r.log.Info("run started", "resources", len(plan.Manifest.Resources), "noop", rec.Request.Noop)
	}
	r.exec(ctx, spanCtx, r.m.start())
	if r.replaying && hist.Last() == 0 {
		r.caughtUp(ctx, spanCtx)
	}
	if !r.flush(ctx) {
		return
	}

	// more is told when a step stopped at maxFactBatch with facts left.
	more := make(chan struct{}, 1)
	renew := time.NewTicker(r.c.cfg.Lease / 3)
	defer renew.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for !r.m.finished {
		timer.Reset(r.deadlines.next())
		select {
		case <-ctx.Done():
			r.handOff()
			return
		case <-hist.Ready():
			if !r.facts(ctx, spanCtx, hist, more) {
				return
			}
		case <-more:
			if !r.facts(ctx, spanCtx, hist, more) {
				return
			}
		case <-r.treeWake: // nil until a child run waits for a slot
			r.startWaiting(ctx, spanCtx)
		case <-timer.C:
			r.expire(ctx, time.Now())
		case <-renew.C:
			rec.Counts = r.m.counts
			if err := r.write(ctx); err != nil {
				r.leave(ctx, err)
				return
			}
		}
		if !r.flush(ctx) {
			return
		}
	}
	r.finish(ctx)
}

// facts folds the history entries that are there, at most maxFactBatch
// (more is told when some are left), and carries out what they call for.
// It returns false when the history cannot be read on: the run was handed
// off (stopping) or left for another coordinator.
func (r *run) facts(ctx, spanCtx context.Context, hist *bus.History, more chan struct{}) bool {
	for n := 0; !r.m.finished; n++ {
		if n == maxFactBatch {
			select {
			case more <- struct{}{}:
			default:
			}
			return true
		}
		e, ok, err := hist.TryNext()
		if err != nil {
			if ctx.Err() != nil {
				// Stopping: the reading saw the cancellation first.
				r.handOff()
				return false
			}
			r.log.Error("run: history reading stopped; another coordinator can resume it", "error", err)
			return false
		}
		if !ok {
			return true
		}
		r.fact(ctx, spanCtx, e, hist.Last())
	}
	return true
}

// fact folds one history entry and carries out what it calls for.
func (r *run) fact(ctx, spanCtx context.Context, e bus.HistoryEntry, last uint64) {
	if e.Err != nil {
		r.log.Warn("history entry dropped: unreadable", "seq", e.Seq, "error", e.Err)
	} else if e.Outcome.RunID != r.rec.RunID {
		r.log.Warn("history entry dropped: not of this run", "outcome_run", e.Outcome.RunID, "seq", e.Seq)
	} else if err := r.verify(e.Outcome); err != nil {
		r.refuse(e, err)
	} else {
		r.exec(ctx, spanCtx, r.m.apply(e.Outcome))
	}
	if r.replaying && e.Seq >= last && e.Rest == 0 {
		// (the last outcome of a batch: the others are of the past too)
		r.caughtUp(ctx, spanCtx)
	}
}

// caughtUp ends a replay: the tasks still in flight are published again
// (same message IDs) and child runs not started yet are started.
func (r *run) caughtUp(ctx, spanCtx context.Context) {
	r.replaying = false
	r.log.Info("run history replayed", "done", r.m.done, "total", len(r.m.tasks))
	r.m.inFlightSegments(func(first, n int) {
		if r.plan.Manifest.Resources[first].Type == "apply" {
			t := &r.m.tasks[first]
			if child, _, err := loadRecord(ctx, r.c.bus.Runs(), r.childID(first, t.attempt)); err == nil {
				r.children[first] = true
				if r.rec.Request.EachWorker {
					r.answerDeadline(first, child.QueuedAt)
				}
				return // the child run is there; its outcome will come
			}
			r.startApply(ctx, r.taskSpan(spanCtx, first, true), first)
			return
		}
		r.publish(ctx, spanCtx, first, n, true)
	})
}

// exec carries out the machine's commands. While replaying, only what
// lives in this process (spans) is redone: the rest was done by the
// coordinator that wrote the history.
func (r *run) exec(ctx, spanCtx context.Context, cmds []command) {
	for _, c := range cmds {
		switch c.kind {
		case cmdDispatch:
			if !r.replaying {
				r.publish(ctx, spanCtx, c.task, c.n, false)
			}
		case cmdStartChild:
			if !r.replaying {
				if r.taskEventRead(bus.EventTaskDispatched) {
					r.event(ctx, bus.Event{Kind: bus.EventTaskDispatched, Task: &c.task, Ref: r.ref(c.task)})
				}
				r.sendEvents() // before the child run's own events
				r.startApply(ctx, r.taskSpan(spanCtx, c.task, false), c.task)
			}
		case cmdRetry:
			delete(r.children, c.task)
			t := r.m.tasks[c.task]
			r.log.Info("resource failed, retrying", "resource", r.ref(c.task), "attempt", t.attempt, "error", t.err)
			r.endSpan(c.task, t.err)
		case cmdSettled:
			delete(r.children, c.task)
			r.settled(ctx, c.task)
		case cmdCancelChild:
			// A child run still waiting for a slot was never started.
			if !r.replaying && !r.isWaiting(c.task) {
				r.cancelChild(ctx, c.task, c.attempt)
			}
		case cmdFinish:
		}
	}
}

// publish sends tasks first..first+n-1 as one task message (a segment
// when n > 1) and sets their deadlines.
func (r *run) publish(ctx, spanCtx context.Context, first, n int, resumed bool) {
	now := time.Now()
	task := r.task(first)
	var requires []int // the items' in-segment requirements, one array for the segment
	if n > 1 {
		task.Segment = make([]bus.SegmentItem, 0, n-1)
		requires = make([]int, 0, n)
	}
	deadline := now
	for i := first; i < first+n; i++ {
		deadline = deadline.Add(r.timeout(i))
		taskCtx := r.taskSpan(spanCtx, i, resumed)
		heap.Push(&r.deadlines, deadlineEntry{at: deadline.Add(r.c.cfg.OutcomeGrace), task: i, attempt: r.m.tasks[i].attempt})
		if i == first {
			if !resumed && r.taskEventRead(bus.EventTaskDispatched) {
				r.event(ctx, bus.Event{Kind: bus.EventTaskDispatched, Task: &i, Ref: r.ref(i)})
			}
			spanCtx = taskCtx // the message carries the first task's span
			continue
		}
		t := r.m.tasks[i]
		item := bus.SegmentItem{Task: i, Attempt: t.attempt, Resource: r.plan.Manifest.Resources[i], Refresh: t.refresh,
			TimeoutMS: r.timeout(i).Milliseconds(), Traceparent: bus.Traceparent(taskCtx), Subscribers: r.subscribers(i), Assume: r.assumeOf(i)}
		at := len(requires)
		for _, p := range r.plan.Requires[i] {
			if p >= first && p < i {
				requires = append(requires, p)
			}
		}
		if len(requires) > at {
			item.Requires = requires[at:len(requires):len(requires)]
		}
		task.Segment = append(task.Segment, item)
	}
	task.Deadline = deadline.UTC()
	task.Resumed = resumed
	task.ContinueAfterFailure = n > 1 && !r.plan.Manifest.FailOnError
	task.BatchOutcomes = n > 1 // this coordinator reads outcome batches (bus.FactBatch)
	signTask(r.rec, &task)
	r.keepTokens(task)
	r.pending = append(r.pending, pendingTask{task: task, ctx: spanCtx, p: r.c.bus.PublishTaskAsync(spanCtx, task)})
}

// keepTokens remembers the tokens signTask gave task's attempts (see
// run.tokens).
func (r *run) keepTokens(task bus.Task) {
	if task.Token == "" {
		return
	}
	if r.tokens == nil {
		r.tokens = map[taskAttempt]string{}
	}
	r.tokens[taskAttempt{task.Task, task.Attempt}] = task.Token
	for _, it := range task.Segment {
		r.tokens[taskAttempt{it.Task, it.Attempt}] = it.Token
	}
}

// verify is verifyFact with the tokens this coordinator kept: a worker's
// outcome of a task it dispatched is checked with one MAC. Anything else
// (a replayed history, a coordinator's fact, a forgery) goes through
// verifyFact.
func (r *run) verify(o bus.Outcome) error {
	k := taskAttempt{o.Task, o.Attempt}
	if token, ok := r.tokens[k]; ok && o.Kind == bus.FactOutcome && bus.VerifyOutcome(o, token) {
		delete(r.tokens, k)
		return nil
	}
	return verifyFact(r.rec, o)
}

// flush waits for the task publications of the step. One that failed is
// published again (same message ID) until it lands or the run's lease
// would lapse: then the run is left for another coordinator, which
// publishes it again after its replay. It returns false when the run was
// left.
func (r *run) flush(ctx context.Context) bool {
	r.sendEvents()
	for len(r.pending) > 0 {
		var failed []pendingTask
		// Retries within Wait stop before the lease would lapse (then the
		// run is handed off below), but an acknowledgement gets at least
		// publishWait.
		wctx, cancel := context.WithDeadline(ctx, later(r.rec.LeaseUntil.Add(-writeRetryDelay), time.Now().Add(publishWait)))
		for _, p := range r.pending {
			if err := p.p.Wait(wctx); err != nil {
				if ctx.Err() != nil {
					cancel()
					r.handOff()
					return false
				}
				r.log.Warn("task not published, publishing again", "resource", p.task.Resource.Ref(), "error", err)
				failed = append(failed, p)
			}
		}
		cancel()
		r.pending = r.pending[:0]
		if len(failed) == 0 {
			return true
		}
		if time.Now().Add(writeRetryDelay).After(r.rec.LeaseUntil) {
			r.log.Error("tasks not published before the lease lapses; leaving the run for recovery", "tasks", len(failed))
			return false
		}
		select {
		case <-ctx.Done():
			r.handOff()
			return false
		case <-time.After(writeRetryDelay):
		}
		for _, p := range failed {
			// The first publication may have landed after all (a lost
			// acknowledgement) and run: the worker looks for its record.
			p.task.Resumed = true
			r.pending = append(r.pending, pendingTask{task: p.task, ctx: p.ctx, p: r.c.bus.PublishTaskAsync(p.ctx, p.task)})
		}
	}
	return true
}

// taskSpan starts the span of task i's current attempt, "resource
// <ref>". Its name and attributes are set only when the span records (as
// the worker's: with no exporter nothing would keep them, and they were a
// dozen allocations per resource; no sampler manifold offers reads the
// name or attributes at start).
func (r *run) taskSpan(ctx context.Context, i int, resumed bool) context.Context {
	res := &r.plan.Manifest.Resources[i]
	// Named once it records: the name's two strings were allocations per
	// resource for spans that record nothing.
	spanCtx, span := r.c.tracer.Start(ctx, "resource")
	if span.IsRecording() {
		ref := res.Ref()
		span.SetName("resource " + ref)
		span.SetAttributes(
			attribute.String("manifold.run_id", r.rec.RunID),
			attribute.String("manifold.resource.ref", ref),
			attribute.String("manifold.resource.type", res.Type),
			attribute.String("manifold.resource.name", res.Name),
			attribute.Int("manifold.attempt", r.m.tasks[i].attempt),
			attribute.String("manifold.pool", r.m.pools[i]),
		)
		if resumed {
			span.SetAttributes(attribute.Bool("manifold.resumed", true))
		}
	}
	if r.spans == nil {
		// A slice, not a map: a map grown to a segment's 1,024 spans and
		// back, per segment.
		r.spans = make([]trace.Span, len(r.plan.Manifest.Resources))
	}
	if old := r.spans[i]; old != nil {
		old.End()
	}
	r.spans[i] = span
	return spanCtx
}

// settled reports the end of task i: span, event, log line, metrics.
func (r *run) settled(ctx context.Context, i int) {
	t := r.m.tasks[i]
	res := &r.plan.Manifest.Resources[i]
	r.endSpan(i, t.err)
	if r.replaying {
		return
	}
	r.c.metrics.taskEnded(res.Type, t.status)
	// Built only when someone reads it (the ref is a string built per
	// resource).
	if r.taskEventRead(bus.EventTaskFinished) {
		r.event(ctx, bus.Event{Kind: bus.EventTaskFinished, Task: &i, Ref: res.Ref(), Status: string(t.status),
			Outcome: t.status, Message: t.message, Diff: t.diff, Error: t.err, Worker: t.worker, DurationMS: t.durationMS,
			Done: r.m.done, Total: len(r.m.tasks)})
	}
	// The next resource of a segment starts on the worker now.
	if j := i + 1; j < len(r.m.tasks) && r.m.tasks[j].seg == t.seg && r.m.tasks[j].segAttempt == t.segAttempt && r.m.inFlight(j, r.m.tasks[j].attempt) &&
		r.taskEventRead(bus.EventTaskDispatched) {
		r.event(ctx, bus.Event{Kind: bus.EventTaskDispatched, Task: &j, Ref: r.ref(j)})
	}
	level := slog.LevelInfo
	if t.status == bus.TaskFailed {
		level = slog.LevelWarn
	}
	if r.log.Enabled(ctx, level) {
		r.log.Log(ctx, level, "resource "+string(t.status), "resource", res.Ref(), "message", t.message, "error", t.err, "worker", t.worker)
	}
}

func (r *run) endSpan(i int, errText string) {
	if i >= len(r.spans) || r.spans[i] == nil {
		return
	}
	span := r.spans[i]
	if span.IsRecording() {
		t := r.m.tasks[i]
		span.SetAttributes(attribute.String("manifold.status", string(t.status)), attribute.Bool("manifold.changed", t.changed),
			attribute.Bool("manifold.refreshed", t.refreshed), attribute.String("manifold.worker", t.worker))
	}
	if errText != "" {
		span.SetStatus(codes.Error, errText)
	}
	span.End()
	r.spans[i] = nil
}

// event stamps a progress event of a resource now and queues it; the
// loop publishes the queue (sendEvents) once the step's task messages are
// sent, so the server stores and delivers a task before the events around
// it. The stamp is taken here, where the event happens: a task_dispatched
// event is stamped before its task is published, as it always was.
func (r *run) event(ctx context.Context, ev bus.Event) {
	if ev.Task != nil && !r.taskEventRead(ev.Kind) {
		return
	}
	ev.RunID, ev.RootRunID, ev.Manifest = r.rec.RunID, r.rec.RootRunID, r.rec.Manifest
	ev.Time = time.Now().UTC()
	r.outbox = append(r.outbox, queuedEvent{ctx: ctx, ev: ev})
}

// taskEventRead reports whether a resource's event of kind is read by
// anyone (Config.EventsRead, asked once per run).
func (r *run) taskEventRead(kind bus.EventKind) bool {
	if !r.eventsKnown {
		r.eventsKnown = true
		if f := r.c.cfg.EventsRead; f != nil {
			r.eventsRead = f(r.rec.RootRunID)
		}
	}
	return r.eventsRead == nil || slices.Contains(r.eventsRead, kind)
}

// queuedEvent is an event stamped and not yet published.
type queuedEvent struct {
	ctx context.Context
	ev  bus.Event
}

// sendEvents publishes the queued events, in order, without waiting for
// their acknowledgement (events hold no state).
func (r *run) sendEvents() {
	for i, q := range r.outbox {
		if err := r.c.bus.PublishEventNoAck(q.ctx, q.ev); err != nil {
			r.log.Debug("event not published", "kind", q.ev.Kind, "error", err)
		}
		r.outbox[i] = queuedEvent{}
	}
	r.outbox = r.outbox[:0]
}

func (r *run) ref(i int) string { return r.plan.Manifest.Resources[i].Ref() }

// expire appends a deadline fact to the history for each task whose
// deadline (plus grace for the worker's own timeout outcome) passed; the
// machine fails the task when it reads the fact back, so a resuming
// coordinator decides the same.
func (r *run) expire(ctx context.Context, now time.Time) {
	for len(r.deadlines) > 0 && !r.deadlines[0].at.After(now) {
		d := heap.Pop(&r.deadlines).(deadlineEntry)
		if !r.m.inFlight(d.task, d.attempt) {
			continue
		}
		o := bus.Outcome{RunID: r.rec.RunID, Kind: bus.FactDeadline, Task: d.task, Attempt: d.attempt, Ref: r.ref(d.task),
			Status: bus.TaskFailed, Worker: "coordinator " + r.c.cfg.Name,
			Error: fmt.Sprintf("no outcome by the task deadline %s: no worker of pool %q finished it in time",
				d.at.Add(-r.c.cfg.OutcomeGrace).UTC().Format(time.RFC3339), r.m.pools[d.task])}
		if r.rec.Request.EachWorker {
			o.Error = r.noAnswer(d.task)
		}
		bus.SignFact(&o, r.rec.Secret)
		id := bus.TaskMsgID(r.rec.RunID, d.task, d.attempt) + "/deadline"
		if err := r.c.bus.PublishFact(ctx, o, id); err != nil {
			r.log.Warn("deadline not recorded; trying again", "resource", o.Ref, "error", err)
			d.at = now.Add(writeRetryDelay)
			heap.Push(&r.deadlines, d)
			return
		}
		if r.rec.Request.EachWorker {
			r.cancelChild(ctx, d.task, d.attempt)
		}
	}
}

// timeout is task i's execution bound: its own, the request's, or the
// coordinator's default.
func (r *run) timeout(i int) time.Duration {
	if d := r.plan.Manifest.Resources[i].Timeout; d > 0 {
		return d
	}
	return cmp.Or(time.Duration(r.rec.Request.TaskTimeoutMS)*time.Millisecond, r.c.cfg.TaskTimeout)
}

// subscribers are the references of the resources that subscribe to
// resource i (for the worker's refresh debts), built once per run from
// the plan's edges.
func (r *run) subscribers(i int) []string {
	if r.subs == nil {
		r.subs = make([][]string, len(r.plan.Manifest.Resources))
		for s, targets := range r.plan.Subscribes {
			for _, j := range targets {
				r.subs[j] = append(r.subs[j], r.plan.Manifest.Resources[s].Ref())
			}
		}
	}
	return r.subs[i]
}

// assumeOf is what task i may assume in a noop run (see assumptions); nil
// outside noop.
func (r *run) assumeOf(i int) *bus.Assume {
	if !r.rec.Request.Noop {
		return nil
	}
	if r.assume == nil {
		r.assume = newAssumptions(r.plan.Manifest)
	}
	return r.assume.of(&r.plan.Manifest.Resources[i])
}

// task builds the message of task i's current attempt.
func (r *run) task(i int) bus.Task {
	rec, t := r.rec, r.m.tasks[i]
	task := bus.Task{
		RunID: rec.RunID, RootRunID: rec.RootRunID, Task: i, Attempt: t.attempt, Manifest: rec.Manifest,
		Resource: r.plan.Manifest.Resources[i], Data: r.plan.Data, Noop: rec.Request.Noop,
		HealthCheckOnly: rec.Request.HealthCheckOnly, Refresh: t.refresh, Pool: r.m.pools[i],
		TimeoutMS: r.timeout(i).Milliseconds(), Bundle: rec.Request.Bundle, Entry: r.entry(),
		Subscribers: r.subscribers(i), Assignment: rec.Request.Assignment, Assume: r.assumeOf(i),
	}
	if rec.Request.WorkDir != "" {
		task.WorkDir = rec.Request.WorkDir
		if rec.Request.Bundle != "" {
			task.WorkDir = filepath.Join(rec.Request.WorkDir, filepath.FromSlash(path.Dir(r.entry())))
		}
	}
	return task
}

// load reads the manifest of the request (inline or from its bundle),
// enforces allow_apply for child runs and prepares the plan.
func (r *run) load(ctx context.Context) (*Plan, error) {
	if r.rec.Request.EachWorker {
		return r.fanOutPlan(ctx)
	}
	if p := r.prepared; p != nil && r.rec.ParentRunID == "" {
		r.prepared = nil
		return p, nil
	}
	if r.rec.ParentRunID == "" && r.c.cfg.Compiled != nil {
		if p, ok := r.c.cfg.Compiled(r.rec.RunID); ok {
			return p, nil
		}
	}
	return loadPlan(ctx, r.rec, r.session, r.c.bundle)
}

// loadPlan rebuilds the plan of a run from its header: the manifest (inline
// or from the bundle), data and session.
func loadPlan(ctx context.Context, rec *record, session map[string]sessionRef, open bundleOpener) (*Plan, error) {
	req := rec.Request
	var src []byte
	var files func(string) ([]byte, error)
	name := rec.Manifest
	var b *bundle.Bundle
	switch {
	case req.Bundle != "":
		var err error
		if b, err = open(ctx, req.Bundle); err != nil {
			return nil, err
		}
		entry := rec.entry()
		files = bundleFiles(b, entry)
		if src, err = b.Read(entry); err != nil {
			return nil, fmt.Errorf("bundle %s: %w", req.Bundle, err)
		}
		if rec.ParentRunID != "" || req.ManifestName == "" {
			name = entry
		}
	case req.ManifestYAML != "":
		src = []byte(req.ManifestYAML)
	default:
		return nil, errors.New("run request carries no manifest: set manifest_yaml or bundle")
	}
	if req.PinWorker != "" && rec.ParentRunID != "" {
		// A fan-out's child is named manifest@worker; its errors name
		// the manifest's file.
		name = strings.TrimSuffix(name, "@"+req.PinWorker)
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
	data, err := runData(req, b)
	if err != nil {
		return nil, err
	}
	// A fan-out is checked centrally (fanout.go); a run pinned to a worker
	// is compiled with that worker's facts.
	p, err := PrepareWith(m, PrepareOpts{ApplyData: rec.ApplyData, Overrides: data, Facts: req.Facts, Source: src, External: func(ref string) bool {
		_, ok := session[ref]
		return ok
	}, Files: files, PerHost: req.EachWorker, HostFacts: req.PinWorker != ""})
	if err != nil || len(req.Only) == 0 || rec.ParentRunID != "" {
		return p, err
	}
	return compile.Subset(p, req.Only) // a repair run (assign.go)
}

// maxInlineSession is the largest session (JSON bytes) kept in a child's
// header; a larger one is stored apart (record.SessionRef).
const maxInlineSession = 16 << 10

// loadSession returns the ancestors' finished resources of a child run.
func loadSession(ctx context.Context, b *bus.Bus, rec *record) (map[string]sessionRef, error) {
	if rec.SessionRef == "" {
		return rec.Session, nil
	}
	data, err := b.GetBundle(ctx, rec.SessionRef)
	if err != nil {
		return nil, fmt.Errorf("session of the parent run: %w", err)
	}
	var session map[string]sessionRef
	if err := json.Unmarshal(data, &session); err != nil {
		return nil, fmt.Errorf("session of the parent run %s: %w", rec.SessionRef, err)
	}
	return session, nil
}

// newRunMachine builds the state machine of a run from its header and plan.
func newRunMachine(rec *record, session map[string]sessionRef, p *Plan) *machine {
	pools := make([]string, len(p.Manifest.Resources))
	for i, res := range p.Manifest.Resources {
		pools[i] = cmp.Or(res.Target, rec.Request.Pool)
		if rec.Request.PinWorker != "" {
			pools[i] = bus.PinnedPool(rec.Request.PinWorker)
		}
	}
	m := newMachine(p, pools, func(ref string) (sessionRef, bool) {
		s, ok := session[ref]
		return s, ok
	})
	m.spread = rec.Spread
	return m
}

// handOff releases the run's lease when this coordinator stops, so a
// standby resumes it at once instead of after the lease lapses. The write
// is tried again for up to handOffWait while the bus does not answer (a
// loaded server): a hand-off lost to one slow reply left the run to wait
// for its whole lease.
func (r *run) handOff() {
	r.rec.LeaseUntil = time.Now().UTC()
	ctx, cancel := context.WithTimeout(context.Background(), handOffWait)
	defer cancel()
	data, err := json.Marshal(r.rec)
	if err == nil {
		err = r.update(ctx, data, time.Now().Add(handOffWait))
	}
	if err != nil {
		r.log.Info("run left unfinished; another coordinator resumes it when its lease lapses", "error", err)
		return
	}
	r.log.Info("run handed off: coordinator stopping; another coordinator resumes it")
}

// handOffWait bounds a stopping coordinator's hand-off of a run.
const handOffWait = 5 * time.Second

// leave stops driving the run after its header could not be written,
// saying why: another coordinator took it over, or the bus failed (then
// the lease lapses and a coordinator resumes it).
func (r *run) leave(ctx context.Context, err error) {
	if !errors.Is(err, bus.ErrRevisionMismatch) {
		r.log.Error("run header not written; leaving the run for recovery", "error", err)
		return
	}
	rec, _, lerr := loadRecord(ctx, r.c.bus.Runs(), r.rec.RunID)
	switch {
	case lerr != nil:
		r.log.Error("run header changed under this coordinator and cannot be read", "error", lerr)
	case rec.Status.Final():
		r.log.Info("run ended elsewhere: stopped driving it", "status", rec.Status)
		r.deactivate(ctx)
	default:
		r.log.Info("run taken over by another coordinator", "owner", rec.Owner)
	}
}

// writeRetryDelay is the pause between attempts of a write that got no
// answer.
const writeRetryDelay = 200 * time.Millisecond

// publishWait is the least a task publication is waited on.
const publishWait = 10 * time.Second

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// write stores the run's header (compare and swap), renewing the lease.
func (r *run) write(ctx context.Context) error {
	held := r.rec.LeaseUntil // the claim this write renews
	r.rec.LeaseUntil = time.Now().Add(r.c.cfg.Lease).UTC()
	data, err := json.Marshal(r.rec)
	if err != nil {
		return err
	}
	return r.update(ctx, data, held)
}

// update writes data as the run's header by compare and swap on r.rev,
// trying again while the bus does not answer, until until. A write whose
// reply was lost may have landed: the mismatch that the next attempt then
// meets is recognised (the stored header is data) and taken as success.
// Any other mismatch is final: another coordinator owns the run.
func (r *run) update(ctx context.Context, data []byte, until time.Time) error {
	ambiguous := false
	for {
		rev, err := r.c.bus.Runs().Update(ctx, runKey(r.rec.RunID), data, r.rev)
		if err == nil {
			r.rev = rev
			return nil
		}
		if errors.Is(err, bus.ErrRevisionMismatch) {
			if ambiguous {
				if e, gerr := r.c.bus.Runs().Get(ctx, runKey(r.rec.RunID)); gerr == nil && bytes.Equal(e.Value, data) {
					r.rev = e.Revision
					return nil
				}
			}
			return err
		}
		// A cluster that lost a node answers nothing while it elects a
		// stream leader: try again while the claim holds (not on a
		// connection closed for good).
		if time.Now().Add(writeRetryDelay).After(until) || errors.Is(err, nats.ErrConnectionClosed) {
			return err
		}
		ambiguous = true
		r.log.Warn("run header not written, retrying", "error", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(writeRetryDelay):
		}
	}
}

// finish ends a run whose tasks have all ended: the report is stored,
// then the header says how it ended, then the history is removed and the
// run_finished event tells followers.
func (r *run) finish(ctx context.Context) {
	rec := r.rec
	rec.Status, rec.FinishedAt = RunSucceeded, time.Now().UTC()
	rec.Counts = r.m.counts
	switch {
	case r.m.cancelled:
		rec.Status, rec.Error = RunCancelled, "cancelled"
	case r.m.counts.Failed > 0:
		rec.Status = RunFailed
		rec.Error = fmt.Sprintf("%d of %d resources failed", r.m.counts.Failed, r.m.counts.Total)
		r.span.SetStatus(codes.Error, rec.Error)
	}
	r.span.SetAttributes(attribute.String("manifold.status", string(rec.Status)))
	rep := r.report()
	if len(rep.NoAnswer) > 0 {
		rec.Error += "; no answer from " + strings.Join(rep.NoAnswer, ", ")
		rep.Error = rec.Error
	}
	folded := r.fold(ctx, rep) // a fan-out's children (fold.go)
	data, err := marshalReport(rep)
	kept := false
	if err == nil && r.c.cfg.Finished != nil {
		// Final now: its reader may print it while it is stored.
		kept = r.c.cfg.Finished(rec.RunID, rep, data)
	}
	if err == nil && !kept {
		err = r.c.bus.PutReport(ctx, rec.RunID, data)
	}
	if err != nil {
		r.log.Error("report not stored; leaving the run for recovery", "error", err)
		return
	}
	if err := r.write(ctx); err != nil {
		r.leave(ctx, err)
		return
	}
	r.c.metrics.runEnded(rec.Status)
	if err := r.c.bus.PurgeHistory(context.WithoutCancel(ctx), rec.RunID); err != nil {
		r.log.Warn("history not removed (it expires)", "error", err)
	}
	r.c.event(ctx, rec, bus.Event{Kind: bus.EventRunFinished, Status: string(rec.Status), Error: rec.Error,
		Done: rep.Counts.Total, Total: rep.Counts.Total, DurationMS: rep.DurationMS})
	// End the run span before the parent hears of it (and ends its apply
	// resource's span), so the child never outlasts its parent in a trace.
	// Ending again on return is a no-op.
	r.span.End()
	r.stashForParent(rep)
	delivered := r.reportToParent(ctx, nil)
	r.forgetTree(ctx)
	if delivered {
		r.deactivate(ctx)
	}
	r.purgeFolded(ctx, folded)
	if rec.ParentRunID == "" {
		r.c.pruneReports(ctx) // retention.go
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
	if werr := r.write(ctx); werr != nil {
		r.leave(ctx, werr)
		return
	}
	r.c.event(ctx, rec, bus.Event{Kind: bus.EventRunRejected, Error: msg})
	r.c.event(ctx, rec, bus.Event{Kind: bus.EventRunFinished, Status: string(RunFailed), Error: msg})
	r.span.End()
	delivered := r.reportToParent(ctx, err)
	r.forgetTree(ctx)
	if delivered {
		r.deactivate(ctx)
	}
}

// forgetTree removes the child-run count of a root run's tree.
func (r *run) forgetTree(ctx context.Context) {
	if r.rec.RootRunID != "" && r.rec.RootRunID != r.rec.RunID {
		return
	}
	if err := r.c.bus.Runs().Delete(context.WithoutCancel(ctx), treeKey(r.rec.RunID)); err != nil && !errors.Is(err, bus.ErrNotFound) {
		r.log.Warn("child-run count not removed", "error", err)
	}
}

// deactivate removes the run's mark of an unfinished run.
func (r *run) deactivate(ctx context.Context) {
	if err := r.c.bus.Runs().Delete(context.WithoutCancel(ctx), activeKey(r.rec.RunID)); err != nil {
		r.log.Warn("active mark not removed; coordinators will skip the finished run", "error", err)
	}
}

// deadlineEntry is a task attempt's deadline (grace included).
type deadlineEntry struct {
	at      time.Time
	task    int
	attempt int
}

// deadlineHeap orders deadlines, earliest first.
type deadlineHeap []deadlineEntry

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadlineEntry)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// next is how long until the earliest deadline passes (an hour when none).
func (h deadlineHeap) next() time.Duration {
	if len(h) == 0 {
		return time.Hour
	}
	return max(time.Until(h[0].at), time.Millisecond)
}

package coordinator

import (
	"cmp"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/schemas"
)

// registration is what the coordinator reads of a worker's entry in the
// workers bucket.
type registration struct {
	Name        string         `json:"name"`
	Pools       []string       `json:"pools"`
	Concurrency int            `json:"concurrency"`
	Facts       map[string]any `json:"facts"`
}

// poolWorkers returns the registrations of the live workers of pool,
// sorted by name.
func poolWorkers(ctx context.Context, b *bus.Bus, pool string) ([]registration, error) {
	// The keys stored (one request: a watch of the bucket, as Keys and
	// bus.Scan do, misses a key its heartbeat rewrites meanwhile, and
	// the host was left out of the fan-out), then their entries, a
	// thousand a request (bus.LastValues; read one by one, even 32 at a
	// time, they were 10,000 requests at the start of a fan-out of 10,000
	// hosts).
	keys, err := b.StoredKeys(ctx, b.Workers())
	if err != nil {
		return nil, err
	}
	entries, err := b.LastValues(ctx, b.Workers(), keys)
	if err != nil {
		return nil, err
	}
	var regs []registration
	for _, e := range entries {
		var reg registration
		if json.Unmarshal(e.Value, &reg) == nil && slices.Contains(reg.Pools, pool) {
			regs = append(regs, reg)
		}
	}
	slices.SortFunc(regs, func(a, b registration) int { return strings.Compare(a.Name, b.Name) })
	return regs, nil
}

// spreadOf is how many task messages the ready resources of a new run are
// shared among (machine.spread): twice the slots (concurrency) of the live
// workers of its pool, so every slot has work and the next segment waits
// for it; 0 (one resource per task) in manifest ordering, which has
// segments of its own, for runs too small to gain from it, for runs pinned
// to a worker and while the pool has no worker. The pool's slots are
// looked up at most every spreadTTL.
func (c *Coordinator) spreadOf(ctx context.Context, rec *record, p *Plan) int {
	if p.Manifest.Ordering != schemas.OrderingGraph || len(p.Manifest.Resources) <= minSpreadRun || rec.Request.PinWorker != "" {
		return 0
	}
	pool := rec.Request.Pool
	c.slotsMu.Lock()
	defer c.slotsMu.Unlock()
	if e, ok := c.slots[pool]; ok && time.Since(e.at) < spreadTTL {
		return 2 * e.n
	}
	regs, err := poolWorkers(ctx, c.bus, pool)
	if err != nil {
		c.log.Warn("workers not listed; resources are sent one per task", "pool", pool, "error", err)
		return 0
	}
	n := 0
	for _, reg := range regs {
		n += max(reg.Concurrency, 1)
	}
	if c.slots == nil {
		c.slots = map[string]slotCount{}
	}
	c.slots[pool] = slotCount{n: n, at: time.Now()}
	return 2 * n
}

// spreadTTL is how long a pool's slot count is used before it is looked
// up again.
const spreadTTL = 2 * time.Second

// slotCount is the slots of a pool's live workers, as of at.
type slotCount struct {
	n  int
	at time.Time
}

// DefaultAnswerTimeout is how long a fan-out waits for a worker's child
// run to end when the request sets no answer_timeout_ms.
const DefaultAnswerTimeout = 10 * time.Minute

// noAnswerPrefix starts the error of a fan-out task whose worker did not
// answer in time; the report shows such a task with status NoAnswer.
const noAnswerPrefix = "no answer: "

// NoAnswer is the report status of a fan-out's child whose worker did not
// finish it within the answer timeout (it counts as failed).
const NoAnswer = "no answer"

// fanOutTargets returns the live workers of pool whose published facts
// make where true (all of them when where is empty), sorted by name. A
// where matching none is an error naming the expression (and the first
// evaluation error, if any).
func fanOutTargets(ctx context.Context, b *bus.Bus, pool, where string) ([]registration, error) {
	regs, err := poolWorkers(ctx, b, pool)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	var names []registration
	var evalErr error
	for _, reg := range regs {
		if where != "" {
			ok, err := whereHolds(where, reg.Facts)
			if err != nil && evalErr == nil {
				evalErr = fmt.Errorf("worker %s: %w", reg.Name, err)
			}
			if !ok {
				continue
			}
		}
		names = append(names, reg)
	}
	switch {
	case len(names) > 0:
		return names, nil
	case where == "":
		return nil, fmt.Errorf("each worker: no live worker in pool %q", pool)
	case evalErr != nil:
		return nil, fmt.Errorf("where %q matches no live worker of pool %q (of %d; %v)", where, pool, len(regs), evalErr)
	}
	return nil, fmt.Errorf("where %q matches no live worker of pool %q (of %d)", where, pool, len(regs))
}

// checkTargets rejects, before it is accepted, a fan-out request whose
// where matches no live worker of its pool.
func (c *Coordinator) checkTargets(ctx context.Context, rr bus.RunRequest) error {
	if rr.AnswerTimeoutMS < 0 {
		return errors.New("answer_timeout_ms must not be negative")
	}
	if rr.Where == "" {
		return nil
	}
	_, err := fanOutTargets(ctx, c.bus, cmp.Or(rr.Pool, bus.DefaultPool), rr.Where)
	return err
}

// fanOutPlan is the plan of an each-worker run: one child run of the
// manifest per live worker of the run's pool (those its where holds on),
// pinned to that worker, all at once. Each child is an apply-like task
// named after its worker.
func (r *run) fanOutPlan(ctx context.Context) (*Plan, error) {
	pool := r.rec.Request.Pool
	// The workers are chosen once and kept in the header: a coordinator
	// resuming the run rebuilds the same plan.
	if r.rec.FanOut == nil {
		// What does not depend on the hosts' facts is checked once, before
		// any host starts (the request may have come from the stream,
		// unchecked); each host compiles the manifest again with its
		// facts when its child run starts.
		if _, err := loadPlan(ctx, r.rec, r.session, r.c.bundle); err != nil {
			return nil, err
		}
		targets, err := fanOutTargets(ctx, r.c.bus, pool, r.rec.Request.Where)
		if err != nil {
			return nil, err
		}
		r.hostFacts = make(map[string]map[string]any, len(targets))
		workers := make([]string, len(targets))
		for i, reg := range targets {
			workers[i], r.hostFacts[reg.Name] = reg.Name, reg.Facts
		}
		r.rec.FanOut = workers
	}
	if len(r.rec.FanOut) == 0 {
		return nil, fmt.Errorf("each worker: no live worker in pool %q", pool)
	}
	r.c.folds.open(r.rec.RunID, r.rec.Secret) // fold.go
	return fanOutPlanOf(r.rec), nil
}

// answerTimeout is the bound on each child run of a fan-out.
func (r *run) answerTimeout() time.Duration {
	return cmp.Or(time.Duration(r.rec.Request.AnswerTimeoutMS)*time.Millisecond, DefaultAnswerTimeout)
}

// answerDeadline sets the deadline of fan-out task i, whose child run
// started at since: expire then records that its worker did not answer
// (noAnswer) and cancels the child.
func (r *run) answerDeadline(i int, since time.Time) {
	heap.Push(&r.deadlines, deadlineEntry{at: since.Add(r.answerTimeout()), task: i, attempt: r.m.tasks[i].attempt})
}

// noAnswer is the error of fan-out task i whose worker did not answer.
func (r *run) noAnswer(i int) string {
	return fmt.Sprintf("%sworker %s did not finish its child run within the answer timeout %s; the child run is cancelled",
		noAnswerPrefix, r.plan.Manifest.Resources[i].Name, r.answerTimeout())
}

// markNoAnswer shows the fan-out tasks that failed for want of an answer
// with status NoAnswer and lists their workers in the report.
func markNoAnswer(rec *record, rep *Report) {
	if !rec.Request.EachWorker {
		return
	}
	for i := range rep.Resources {
		rr := &rep.Resources[i]
		if rr.Status == string(bus.TaskFailed) && strings.HasPrefix(rr.Error, noAnswerPrefix) {
			rr.Status, rr.Worker = NoAnswer, rr.Name
			rep.NoAnswer = append(rep.NoAnswer, rr.Name)
		}
	}
}

// fanOutPlanOf is the plan of an each-worker run over the workers its
// header names.
func fanOutPlanOf(rec *record) *Plan {
	workers := rec.FanOut
	m := &schemas.Manifest{Path: rec.Manifest, Ordering: schemas.OrderingGraph}
	for _, w := range workers {
		m.Resources = append(m.Resources, schemas.Resource{Type: "apply", Name: w})
	}
	p := &Plan{Manifest: m, Data: rec.Request.Data, Requires: make([][]int, len(workers)),
		Subscribes: make([][]int, len(workers)), After: make([]int, len(workers)),
		External: map[int][]string{}, ExternalSubscribes: map[int][]string{}}
	for i := range p.After {
		p.After[i] = -1
	}
	return p
}

// startApply starts the child run of task i: a child manifest for an
// apply resource, the whole manifest on one worker for an each-worker run.
func (r *run) startApply(ctx, spanCtx context.Context, i int) {
	if r.rec.Request.EachWorker {
		r.startPinnedChild(ctx, spanCtx, i)
		return
	}
	r.startChild(ctx, spanCtx, i)
}

// startPinnedChild starts the child run of an each-worker run's task i:
// the whole manifest, pinned to worker res.Name. The start (the child's
// active mark and record, each a round trip to the server) runs beside
// the fan-out's loop, fanOutStarts at a time: one after another on the
// loop they bounded a fan-out to one child every ~5 ms (a 1,000-host
// fan-out spent 4.8 of its 5.4 s starting children).
func (r *run) startPinnedChild(ctx, spanCtx context.Context, i int) {
	rec, t := r.rec, r.m.tasks[i]
	worker := r.plan.Manifest.Resources[i].Name
	req := rec.Request
	req.RunID, req.IdempotencyKey, req.EachWorker, req.PinWorker = r.childID(i, t.attempt), "", false, worker
	req.Where, req.AnswerTimeoutMS = "", 0
	facts, err := r.workerFacts(ctx, worker)
	if err != nil {
		r.childFailed(ctx, i, fmt.Errorf("worker %s: %w", worker, err))
		return
	}
	// The child is compiled with the worker's facts (loadPlan, HostFacts):
	// its hierarchy, names and properties are that host's.
	req.Facts = facts
	// accept reads the parent's record while the loop goes on writing
	// it (counts, lease): it gets a copy.
	parent := *rec
	child := &childOf{
		parent: &parent, task: i, attempt: t.attempt, depth: rec.Depth + 1, name: rec.Manifest + "@" + worker,
		chain: r.chain(), maxDepth: rec.MaxDepth,
	}
	// The answer deadline runs from now, started or not: a start that
	// never ends is a host that does not answer.
	r.answerDeadline(i, time.Now())
	failed := bus.Outcome{RunID: rec.RunID, Task: i, Attempt: t.attempt, Ref: r.ref(i), Status: bus.TaskFailed,
		Worker: "coordinator " + r.c.cfg.Name}
	start := func() {
		if err := r.c.accept(ctx, spanCtx, req, child); err != nil && ctx.Err() == nil {
			// As childFailed, from values taken on the loop.
			failed.Error = fmt.Errorf("worker %s: start child run: %w", worker, err).Error()
			bus.SignFact(&failed, parent.Secret)
			if perr := r.c.bus.PublishFact(context.WithoutCancel(ctx), failed, bus.TaskMsgID(failed.RunID, i, failed.Attempt)+"/child"); perr != nil {
				r.log.Error("apply failure not recorded; the run is left for recovery", "resource", failed.Ref, "error", perr)
			}
		}
	}
	if !r.c.folds.startChild(ctx, rec.RunID, &r.c.wg, start) {
		start() // not a fan-out opened here (fanOutPlan opens them all)
	}
}

// workerFacts returns the facts a fan-out's target worker published: as
// read when the targets were chosen, or (a resumed run) as published now.
func (r *run) workerFacts(ctx context.Context, worker string) (map[string]any, error) {
	if f, ok := r.hostFacts[worker]; ok {
		return f, nil
	}
	e, err := r.c.bus.Workers().Get(ctx, worker)
	if errors.Is(err, bus.ErrNotFound) {
		return nil, errors.New("its facts are not published: the worker left the pool (no entry in the workers bucket)")
	} else if err != nil {
		return nil, fmt.Errorf("read its facts: %w", err)
	}
	var reg registration
	if err := json.Unmarshal(e.Value, &reg); err != nil {
		return nil, fmt.Errorf("unreadable registration: %w", err)
	}
	return reg.Facts, nil
}

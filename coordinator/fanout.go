package coordinator

import (
	"context"
	"encoding/json"
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
	Name        string   `json:"name"`
	Pools       []string `json:"pools"`
	Concurrency int      `json:"concurrency"`
}

// poolWorkers returns the registrations of the live workers of pool,
// sorted by name.
func poolWorkers(ctx context.Context, b *bus.Bus, pool string) ([]registration, error) {
	keys, err := b.Workers().Keys(ctx)
	if err != nil {
		return nil, err
	}
	var regs []registration
	for _, k := range keys {
		e, err := b.Workers().Get(ctx, k)
		if err != nil {
			continue // expired meanwhile
		}
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
	if p.Manifest.Ordering != schemas.OrderingGraph || len(p.Manifest.Resources) <= maxGraphSegment || rec.Request.PinWorker != "" {
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

// liveWorkers returns the names of the live workers of pool, sorted.
func liveWorkers(ctx context.Context, b *bus.Bus, pool string) ([]string, error) {
	regs, err := poolWorkers(ctx, b, pool)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(regs))
	for i, reg := range regs {
		names[i] = reg.Name
	}
	return names, nil
}

// fanOutPlan is the plan of an each-worker run: one child run of the
// manifest per live worker of the run's pool, pinned to that worker, all
// at once. Each child is an apply-like task named after its worker.
func (r *run) fanOutPlan(ctx context.Context) (*Plan, error) {
	pool := r.rec.Request.Pool
	// The workers are chosen once and kept in the header: a coordinator
	// resuming the run rebuilds the same plan.
	workers := r.rec.FanOut
	if workers == nil {
		var err error
		if workers, err = liveWorkers(ctx, r.c.bus, pool); err != nil {
			return nil, fmt.Errorf("each worker: list workers: %w", err)
		}
		r.rec.FanOut = workers
	}
	if len(workers) == 0 {
		return nil, fmt.Errorf("each worker: no live worker in pool %q", pool)
	}
	return fanOutPlanOf(r.rec), nil
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
// the whole manifest, pinned to worker res.Name.
func (r *run) startPinnedChild(ctx, spanCtx context.Context, i int) {
	rec, t := r.rec, r.m.tasks[i]
	worker := r.plan.Manifest.Resources[i].Name
	req := rec.Request
	req.RunID, req.IdempotencyKey, req.EachWorker, req.PinWorker = r.childID(i, t.attempt), "", false, worker
	err := r.c.accept(ctx, spanCtx, req, &childOf{
		parent: rec, task: i, attempt: t.attempt, depth: rec.Depth + 1, name: rec.Manifest + "@" + worker,
		chain: r.chain(), maxDepth: rec.MaxDepth,
	})
	if err != nil {
		r.childFailed(ctx, i, fmt.Errorf("worker %s: start child run: %w", worker, err))
	}
}

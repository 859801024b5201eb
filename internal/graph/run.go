package graph

import (
	"context"
	"sync"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/compile"
)

// MaxCachedPlans bounds a Plans cache: 256 plans (a run's plan and its
// child runs' each count one); past it the cache starts over.
const MaxCachedPlans = 256

// Plans fetches run plans (coordinator.GetPlan) and keeps them: a run's
// plan never changes. Safe for concurrent use; the zero value is ready.
type Plans struct {
	mu    sync.Mutex
	plans map[string]*compile.Plan
}

// Get returns the plan of runID, from the cache or the bus.
func (c *Plans) Get(ctx context.Context, b *bus.Bus, runID string) (*compile.Plan, error) {
	c.mu.Lock()
	p, ok := c.plans[runID]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := coordinator.GetPlan(ctx, b, runID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.plans == nil || len(c.plans) >= MaxCachedPlans {
		c.plans = map[string]*compile.Plan{}
	}
	c.plans[runID] = p
	return p, nil
}

// FromRun builds the graph of a run from its plan and the plans of the
// child runs its apply resources started, coloured by rep (the run's
// report, child reports nested, as coordinator.GetReport returns it). A
// child run whose plan cannot be read is drawn as its apply node alone.
func FromRun(ctx context.Context, b *bus.Bus, plans *Plans, rep *coordinator.Report) (*Graph, error) {
	root, err := plans.Get(ctx, b, rep.RunID)
	if err != nil {
		return nil, err
	}
	reports := map[*compile.Plan]*coordinator.Report{root: rep}
	g, err := FromPlan(root, func(p *compile.Plan, i int) *compile.Plan {
		r := reports[p]
		if r == nil || i >= len(r.Resources) || r.Resources[i].Child == nil {
			return nil
		}
		child := r.Resources[i].Child
		cp, err := plans.Get(ctx, b, child.RunID)
		if err != nil {
			return nil
		}
		reports[cp] = child
		return cp
	})
	if err != nil {
		return nil, err
	}
	g.Colour(rep)
	return g, nil
}

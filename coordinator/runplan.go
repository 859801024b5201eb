package coordinator

import (
	"context"
	"fmt"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bundle"
)

// GetPlan returns the plan of a run: its manifest compiled with the run's
// data, with the edges the run follows, rebuilt from the run's header and
// bundle as a coordinator resuming the run would. The plan of an apply
// resource's child manifest is the child run's (GetPlan of
// ResourceReport.ChildRunID); an each-worker run's plan has one apply
// resource per worker. It returns an error wrapping bus.ErrNotFound for
// an unknown run or a bundle no longer stored. Read-only: it writes
// nothing.
func GetPlan(ctx context.Context, b *bus.Bus, runID string) (*Plan, error) {
	rec, _, err := loadRecord(ctx, b.Runs(), runID)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	if rec.Request.EachWorker {
		return fanOutPlanOf(rec), nil
	}
	session, err := loadSession(ctx, b, rec)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", runID, err)
	}
	p, err := loadPlan(ctx, rec, session, func(ctx context.Context, ref string) (*bundle.Bundle, error) {
		data, err := b.GetBundle(ctx, ref)
		if err != nil {
			return nil, err
		}
		return bundle.Open(data)
	})
	if err != nil {
		return nil, fmt.Errorf("run %s: plan: %w", runID, err)
	}
	return p, nil
}

package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/bus"
)

// activeKey marks an unfinished run in the runs bucket, so coordinators
// looking for runs to resume list only those.
func activeKey(runID string) string { return "active." + runID }

// driving is the set of runs this coordinator drives right now, each with
// a channel that wakes its loop (to notice a cancellation at once).
type driving struct {
	mu   sync.Mutex
	runs map[string]chan struct{}
}

// claim marks runID as driven here; false if it already is.
func (d *driving) claim(runID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.runs[runID]; ok {
		return false
	}
	if d.runs == nil {
		d.runs = map[string]chan struct{}{}
	}
	d.runs[runID] = make(chan struct{}, 1)
	return true
}

// wakeup returns the wake channel of a run driven here (nil otherwise).
func (d *driving) wakeup(runID string) chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.runs[runID]
}

// wake pokes the loop of a run driven here, if any.
func (d *driving) wake(runID string) {
	if ch := d.wakeup(runID); ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (d *driving) release(runID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.runs, runID)
}

// orphanKeys remembers when each active key without a run record was
// first seen (tryResume), so that one is removed only a lease later: the
// accepting coordinator creates the record right after the key.
type orphanKeys struct {
	mu    sync.Mutex
	since map[string]time.Time
}

// lapsed notes runID's key seen without a record at now, and reports
// whether it was first seen so at least grace before.
func (o *orphanKeys) lapsed(runID string, now time.Time, grace time.Duration) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	first, ok := o.since[runID]
	if !ok {
		if o.since == nil {
			o.since = map[string]time.Time{}
		}
		o.since[runID] = now
		return false
	}
	if now.Sub(first) < grace {
		return false
	}
	delete(o.since, runID)
	return true
}

// forget drops runID: its record is there.
func (o *orphanKeys) forget(runID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.since, runID)
}

// recoverLoop resumes unfinished runs whose owner's lease lapsed: their
// coordinator died or stopped. State comes from the run record; outcomes
// wait in the run's durable outcome consumer.
func (c *Coordinator) recoverLoop(ctx context.Context) {
	t := time.NewTicker(c.cfg.ScanInterval)
	defer t.Stop()
	for {
		c.recoverOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Coordinator) recoverOnce(ctx context.Context) {
	keys, err := c.bus.Runs().KeysMatching(ctx, "active.*")
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("looking for runs to resume failed", "error", err)
		}
		return
	}
	for _, k := range keys {
		id := strings.TrimPrefix(k, "active.")
		if err := c.tryResume(ctx, id); err != nil && ctx.Err() == nil {
			c.log.Warn("run not resumed", "run_id", id, "error", err)
		}
	}
}

// tryResume takes over a run whose lease lapsed, by compare and swap, and
// drives it on.
func (c *Coordinator) tryResume(ctx context.Context, runID string) error {
	c.driving.mu.Lock()
	_, busy := c.driving.runs[runID]
	c.driving.mu.Unlock()
	if busy {
		return nil
	}
	rec, rev, err := loadRecord(ctx, c.bus.Runs(), runID)
	if errors.Is(err, bus.ErrNotFound) {
		// A run's active key is put before its record is created
		// (acceptPrepared), so that a coordinator dying in between
		// leaves nothing unresumable: a key without a record is a
		// run being accepted right now, or one whose accepting
		// coordinator died before the record. Only the second is
		// removed, a lease after it was first seen so.
		if !c.orphans.lapsed(runID, time.Now(), c.cfg.Lease) {
			return nil
		}
		return c.bus.Runs().Delete(ctx, activeKey(runID))
	} else if err != nil {
		return err
	}
	c.orphans.forget(runID)
	if rec.Status.Final() {
		if rec.ParentRunID != "" {
			return c.redeliver(ctx, rec)
		}
		return c.bus.Runs().Delete(ctx, activeKey(runID))
	}
	if time.Now().Before(rec.LeaseUntil) {
		return nil // its owner is alive
	}
	previous := rec.Owner
	rec.Owner, rec.LeaseUntil = c.cfg.Name, time.Now().Add(c.cfg.Lease).UTC()
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	rev, err = c.bus.Runs().Update(ctx, runKey(runID), data, rev)
	if errors.Is(err, bus.ErrRevisionMismatch) {
		return nil // another coordinator was quicker, or the owner renewed
	} else if err != nil {
		return err
	}
	if !c.driving.claim(runID) {
		return nil
	}
	r := &run{c: c, rec: rec, rev: rev, log: c.log.With("run_id", rec.RunID, "manifest", rec.Manifest)}
	if rec.ParentRunID != "" {
		r.log = r.log.With("root_run_id", rec.RootRunID, "parent_run_id", rec.ParentRunID)
	}
	r.log.Info("resuming run", "previous_owner", previous, "status", rec.Status)
	traceCtx := context.Background()
	if tid, err := trace.TraceIDFromHex(rec.TraceID); err == nil {
		if sid, err := trace.SpanIDFromHex(rec.SpanID); err == nil {
			traceCtx = trace.ContextWithRemoteSpanContext(traceCtx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
		}
	}
	if rec.ParentRunID != "" {
		// A child run resumed here counts among its tree's live runs; it
		// is in progress already, so it never waits for a slot.
		c.trees.acquire(rootOf(rec), 0, true)
	}
	c.wg.Go(func() {
		defer c.driving.release(runID)
		if rec.ParentRunID != "" {
			defer c.trees.release(rootOf(rec))
		}
		r.drive(ctx, traceCtx, true)
	})
	return nil
}

// redeliver sends the outcome of an ended child run to its parent again,
// then removes the run's active mark: the child's coordinator could not
// deliver it (reportToParent) or died between ending the child and
// removing the mark. Copies are harmless (the parent ignores an outcome of
// a task no longer in flight).
func (c *Coordinator) redeliver(ctx context.Context, rec *record) error {
	if !c.driving.claim(rec.RunID) {
		return nil
	}
	r := &run{c: c, rec: rec, log: c.log.With("run_id", rec.RunID, "manifest", rec.Manifest,
		"root_run_id", rec.RootRunID, "parent_run_id", rec.ParentRunID)}
	c.wg.Go(func() {
		defer c.driving.release(rec.RunID)
		r.log.Info("delivering an ended child run's outcome to its parent again")
		if r.reportToParent(ctx, rec.rejection()) {
			r.deactivate(ctx)
		}
	})
	return nil
}

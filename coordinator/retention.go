package coordinator

import (
	"context"
	"sync"
	"time"
)

// Bounds on what finished runs keep: the reports store by count, by age
// and by size. A report removed takes its run's record with it (its key and the
// delete markers of its active mark and its tree's count, by subject),
// so `manifold runs` lists what `manifold status` can show.

const (
	// DefaultMaxReports is the default of Config.MaxReports.
	DefaultMaxReports = 50_000
	// DefaultReportsMaxAge is the default of Config.ReportsMaxAge.
	DefaultReportsMaxAge = 30 * 24 * time.Hour
	// DefaultReportsMaxBytes is the default of Config.ReportsMaxBytes:
	// 10 GiB. Reports are bounded by count, but not all reports are
	// small: a fan-out's holds every child's lines (6.2 MB at 1,000 hosts
	// of 20 resources, docs/fleet-scale.md), so 50,000 of them could
	// take 310 GB of disk.
	DefaultReportsMaxBytes int64 = 10 << 30
)

// pruner runs one prune of the reports store at a time, at most every
// Config.PruneInterval; a prune asked for while one runs is done after it.
type pruner struct {
	mu      sync.Mutex
	last    time.Time
	running bool
	again   bool
}

// due reports whether a prune should start now, and marks it started.
func (p *pruner) due(now time.Time, every time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		p.again = true
		return false
	}
	if now.Sub(p.last) < every {
		return false
	}
	p.running, p.last = true, now
	return true
}

// done ends a prune; true asks for another (one was asked meanwhile).
func (p *pruner) done() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.again {
		p.again = false
		return true
	}
	p.running = false
	return false
}

// reset makes the first prune come an interval after now.
func (p *pruner) reset(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = now
}

// pruneReports removes, in the background, the oldest reports past
// Config.MaxReports, Config.ReportsMaxAge or Config.ReportsMaxBytes, and
// their runs' records;
// called when a root run ended.
func (c *Coordinator) pruneReports(ctx context.Context) {
	if c.cfg.MaxReports < 0 && c.cfg.ReportsMaxAge < 0 && c.cfg.ReportsMaxBytes < 0 || !c.prune.due(time.Now(), c.cfg.PruneInterval) {
		return
	}
	c.wg.Go(func() {
		for c.pruneOnce(ctx) {
		}
	})
}

// pruneOnce prunes the reports store once and reports whether to again.
func (c *Coordinator) pruneOnce(ctx context.Context) bool {
	n, err := c.bus.PruneReports(ctx, max(c.cfg.MaxReports, 0), max(c.cfg.ReportsMaxAge, 0), max(c.cfg.ReportsMaxBytes, 0), func(runID string) {
		if err := c.bus.PurgeKey(ctx, c.bus.Runs(), runKey(runID)); err != nil {
			c.log.Warn("record of a pruned report not removed", "run_id", runID, "error", err)
			return
		}
		_ = c.bus.PurgeKey(ctx, c.bus.Runs(), activeKey(runID))
		// A root run with child runs leaves the delete marker of its
		// tree's count (forgetTree): one key per such run, for ever.
		_ = c.bus.PurgeKey(ctx, c.bus.Runs(), treeKey(runID))
	})
	if err != nil && ctx.Err() == nil {
		c.log.Warn("reports not pruned", "error", err)
	}
	if n > 0 {
		c.log.Info("reports pruned: the oldest past the bounds removed with their run records", "removed", n,
			"max_reports", c.cfg.MaxReports, "reports_max_age", c.cfg.ReportsMaxAge, "reports_max_bytes", c.cfg.ReportsMaxBytes)
	}
	return c.prune.done() && ctx.Err() == nil
}

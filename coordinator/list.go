package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/manifold-run/manifold/bus"
)

// DefaultListLimit is how many runs ListRuns returns when asked for none.
const DefaultListLimit = 20

// ListRuns returns the newest root runs (child runs of apply resources are
// part of their root run's report, not listed), newest first by the time
// they were queued, at most limit of them (DefaultListLimit when limit is
// zero or negative). It reads every run record in the runs bucket, so it
// costs one read per stored run.
func ListRuns(ctx context.Context, b *bus.Bus, limit int) ([]bus.RunSummary, error) {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	keys, err := b.Runs().KeysMatching(ctx, "run.*")
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var recs []*record
	for _, k := range keys {
		id, ok := strings.CutPrefix(k, "run.")
		if !ok {
			continue
		}
		rec, _, err := loadRecord(ctx, b.Runs(), id)
		if errors.Is(err, bus.ErrNotFound) {
			continue // deleted between listing and reading
		} else if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		if rec.ParentRunID != "" {
			continue
		}
		recs = append(recs, rec)
	}
	slices.SortFunc(recs, func(a, b *record) int {
		return cmp.Or(b.QueuedAt.Compare(a.QueuedAt), strings.Compare(b.RunID, a.RunID))
	})
	if len(recs) > limit {
		recs = recs[:limit]
	}
	out := make([]bus.RunSummary, 0, len(recs))
	for _, rec := range recs {
		out = append(out, rec.summary())
	}
	return out, nil
}

// summary renders the record as one line of a run listing.
func (rec *record) summary() bus.RunSummary {
	rep := rec.header()
	c := rep.Counts
	return bus.RunSummary{
		RunID: rec.RunID, Manifest: rec.Manifest, Status: string(rec.Status), Noop: rec.Request.Noop,
		Pool: rec.Request.Pool, Trigger: rec.Request.Trigger, Assignment: rec.Request.Assignment, Offline: rec.Request.Offline, Error: rec.Error, QueuedAt: rec.QueuedAt,
		StartedAt: rep.StartedAt, FinishedAt: rep.FinishedAt,
		Counts: bus.RunCounts{Total: c.Total, Changed: c.Changed, Stable: c.Stable, Failed: c.Failed, Skipped: c.Skipped},
	}
}

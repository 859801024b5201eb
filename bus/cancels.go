package bus

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// BucketCancels is the KV bucket of cancelled runs: one key per cancelled
// run (its run ID), written by coordinators when a run or an ancestor of
// it is cancelled, read by workers before they execute a task, so that a
// task of a cancelled run still queued is dropped, not run. Its entries
// expire after Config.CancelsTTL.
const BucketCancels = "manifold-cancels"

// MarkCancelled records that runID was cancelled, in BucketCancels.
func (b *Bus) MarkCancelled(ctx context.Context, runID string) error {
	if err := ValidToken(runID); err != nil {
		return fmt.Errorf("bus: mark %q cancelled: %w", runID, err)
	}
	if _, err := b.cancels.Put(ctx, runID, []byte(nowUTC().Format(time.RFC3339Nano))); err != nil {
		return err
	}
	return nil
}

// Cancelled reports whether any of runIDs was marked cancelled (empty IDs
// are ignored). It costs a direct get per run ID.
func (b *Bus) Cancelled(ctx context.Context, runIDs ...string) (bool, error) {
	for _, id := range runIDs {
		if id == "" || ValidToken(id) != nil {
			continue
		}
		_, err := b.cancels.Get(ctx, id)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, ErrNotFound):
		default:
			return false, err
		}
	}
	return false, nil
}

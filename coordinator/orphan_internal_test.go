package coordinator

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// TestActiveKeyWithoutRecordKeptALease: an active key whose run record is
// not there yet (a run being accepted: acceptPrepared puts the key, then
// creates the record) survives a scan; a key still without a record a
// lease after it was first seen so (its accepting coordinator died in
// between) is removed; a key whose record came meanwhile is forgotten as
// an orphan.
func TestActiveKeyWithoutRecordKeptALease(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	c, err := New(Config{Bus: b, Logger: slog.New(slog.DiscardHandler), Name: "scanner", Lease: time.Hour})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = b.Runs().Put(ctx, activeKey("accepting"), nil)
	require.NoError(t, err)
	_, err = b.Runs().Put(ctx, activeKey("abandoned"), nil)
	require.NoError(t, err)

	for range 2 {
		c.recoverOnce(ctx)
		for _, id := range []string{"accepting", "abandoned"} {
			_, err := b.Runs().Get(ctx, activeKey(id))
			require.NoError(t, err, "%s: removed before a lease passed", id)
		}
	}

	// The accepting coordinator creates its record (finished here, so
	// that the scan does not drive it); the other's never comes.
	_, err = b.Runs().Create(ctx, runKey("accepting"), []byte(`{"v":1,"run_id":"accepting","status":"succeeded"}`))
	require.NoError(t, err)
	c.orphans.mu.Lock()
	for id := range c.orphans.since {
		c.orphans.since[id] = time.Now().Add(-2 * time.Hour) // a lease and more ago
	}
	c.orphans.mu.Unlock()
	c.recoverOnce(ctx)
	_, err = b.Runs().Get(ctx, activeKey("abandoned"))
	require.ErrorIs(t, err, bus.ErrNotFound, "a lease later, still without a record: removed")
	c.orphans.mu.Lock()
	defer c.orphans.mu.Unlock()
	require.Empty(t, c.orphans.since, "the accepted run is no orphan, the removed one is forgotten")
}

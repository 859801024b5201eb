package bus_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// TestScanWhileEntriesAreRewritten: a key that exists for the whole scan
// is visited even when it is rewritten while the scan runs (workers
// heartbeat into their entries all the time). The ordered consumer alone
// came back one key short in some scans: the old message of a rewritten
// key is gone before it is delivered, and the watcher's end marker can
// come before the new one.
func TestScanWhileEntriesAreRewritten(t *testing.T) {
	t.Parallel()
	const keys = 300
	_, b := bustest.Start(t, bus.Config{WorkerTTL: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for i := range keys {
		_, err := b.Workers().Put(ctx, fmt.Sprintf("host-%04d", i), []byte(`{}`))
		require.NoError(t, err)
	}
	beat, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; beat.Err() == nil; i++ {
			_, _ = b.Workers().Put(beat, fmt.Sprintf("host-%04d", i%keys), fmt.Appendf(nil, `{"beat":%d}`, i))
		}
	})
	defer wg.Wait()
	defer stop()
	for round := range 40 {
		seen := map[string]int{}
		require.NoError(t, b.Scan(ctx, b.Workers(), func(e bus.Entry) error {
			seen[e.Key]++
			return nil
		}))
		for i := range keys {
			k := fmt.Sprintf("host-%04d", i)
			require.Equal(t, 1, seen[k], "scan %d: key %s visited %d times (%d keys visited)", round, k, seen[k], len(seen))
		}
	}
}

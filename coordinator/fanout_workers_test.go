package coordinator

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

// TestPoolWorkersWhileHeartbeating: a fan-out's target list has every
// live worker of the pool even while their heartbeats rewrite their
// entries. (A single pass over the bucket, bus.Scan, missed a key
// rewritten during it: 5 of 40 listings of 300 workers were short, and a
// benchmark fan-out left a host out.)
func TestPoolWorkersWhileHeartbeating(t *testing.T) {
	const workers = 300
	_, b := bustest.Start(t, bus.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	entry := func(i int) []byte {
		return fmt.Appendf(nil, `{"name":"host-%04d","pools":["fleet"],"concurrency":1}`, i)
	}
	for i := range workers {
		_, err := b.Workers().Put(ctx, fmt.Sprintf("host-%04d", i), entry(i))
		require.NoError(t, err)
	}
	// Another pool's worker is not listed.
	_, err := b.Workers().Put(ctx, "other", []byte(`{"name":"other","pools":["web"]}`))
	require.NoError(t, err)
	beat, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; beat.Err() == nil; i++ {
			_, _ = b.Workers().Put(beat, fmt.Sprintf("host-%04d", i%workers), entry(i%workers))
		}
	})
	defer wg.Wait()
	defer stop()
	for round := range 40 {
		regs, err := poolWorkers(ctx, b, "fleet")
		require.NoError(t, err)
		require.Len(t, regs, workers, "listing %d", round)
		require.Equal(t, "host-0000", regs[0].Name)
		require.Equal(t, fmt.Sprintf("host-%04d", workers-1), regs[workers-1].Name)
	}
}

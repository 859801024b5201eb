package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// TestScanVisitsEveryLiveEntryOnce: one scan visits each live key once,
// with its newest value and revision (as Get returns them); overwritten
// revisions, deleted and purged keys are not visited; the scan's consumer
// is gone afterwards.
func TestScanVisitsEveryLiveEntryOnce(t *testing.T) {
	srv, b := bustest.Start(t, bus.Config{WorkerTTL: time.Hour})
	ctx := ctxT(t)
	kv := b.Workers()

	// Empty: returns at once, nothing visited.
	start := time.Now()
	require.NoError(t, b.Scan(ctx, kv, func(e bus.Entry) error { return fmt.Errorf("visited %s", e.Key) }))
	require.Less(t, time.Since(start), 5*time.Second)

	const n = 2500
	for i := range n {
		_, err := kv.Put(ctx, fmt.Sprintf("w%04d", i), []byte("v1"))
		require.NoError(t, err)
	}
	for i := 0; i < n; i += 10 { // every tenth key overwritten
		_, err := kv.Put(ctx, fmt.Sprintf("w%04d", i), []byte("v2"))
		require.NoError(t, err)
	}
	require.NoError(t, kv.Delete(ctx, "w0001"))
	nc, err := srv.Connect("purge")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	raw, err := js.KeyValue(ctx, bus.BucketWorkers)
	require.NoError(t, err)
	require.NoError(t, raw.Purge(ctx, "w0002"))

	seen := map[string]bus.Entry{}
	require.NoError(t, b.Scan(ctx, kv, func(e bus.Entry) error {
		_, dup := seen[e.Key]
		require.False(t, dup, "key %s visited twice", e.Key)
		seen[e.Key] = e
		return nil
	}))
	require.Len(t, seen, n-2)
	require.NotContains(t, seen, "w0001", "deleted")
	require.NotContains(t, seen, "w0002", "purged")
	for _, k := range []string{"w0000", "w0003", "w0010", "w2499"} {
		got, err := kv.Get(ctx, k)
		require.NoError(t, err)
		require.Equal(t, got, seen[k], "key %s", k)
	}
	require.Equal(t, "v2", string(seen["w0010"].Value))
	require.Equal(t, "v1", string(seen["w0011"].Value))

	st, err := js.Stream(ctx, "KV_"+bus.BucketWorkers)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Consumers == 0
	}, 10*time.Second, 20*time.Millisecond, "the scan's consumer is deleted")
}

// TestScanStopsAtVisitError: an error of visit ends the scan and is
// returned as it is.
func TestScanStopsAtVisitError(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{WorkerTTL: time.Hour})
	ctx := ctxT(t)
	for i := range 50 {
		_, err := b.Workers().Put(ctx, fmt.Sprintf("w%02d", i), []byte("{}"))
		require.NoError(t, err)
	}
	stop := errors.New("enough")
	visits := 0
	err := b.Scan(ctx, b.Workers(), func(bus.Entry) error {
		visits++
		if visits == 3 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 3, visits)
}

// TestScanSkipsExpiredEntries: entries whose TTL has passed are not
// visited, and the scan ends (it does not wait for them).
func TestScanSkipsExpiredEntries(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{WorkerTTL: time.Second})
	ctx := ctxT(t)
	for i := range 20 {
		_, err := b.Workers().Put(ctx, fmt.Sprintf("old%02d", i), []byte("{}"))
		require.NoError(t, err)
	}
	// Wait for the expiry the server carries out (no sleep: poll Get).
	require.Eventually(t, func() bool {
		_, err := b.Workers().Get(ctx, "old19")
		return errors.Is(err, bus.ErrNotFound)
	}, 15*time.Second, 50*time.Millisecond)
	_, err := b.Workers().Put(ctx, "new", []byte("{}"))
	require.NoError(t, err)
	var keys []string
	require.NoError(t, b.Scan(ctx, b.Workers(), func(e bus.Entry) error { keys = append(keys, e.Key); return nil }))
	require.Equal(t, []string{"new"}, keys)
}

// TestScanContextEnds: a scan whose context has ended fails with the
// context's error, naming the bucket.
func TestScanContextEnds(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{WorkerTTL: time.Hour})
	_, err := b.Workers().Put(ctxT(t), "w1", []byte("{}"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = b.Scan(ctx, b.Workers(), func(bus.Entry) error { return nil })
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), bus.BucketWorkers), err.Error())
}

// benchEntry is the size of a worker's entry with gathered facts on a
// 2-CPU host (4.5 KB of facts plus pools, assignments and fleet notes).
const benchEntry = 5 << 10

// fillWorkers writes n entries of benchEntry bytes to the workers bucket
// with asynchronous publishes (setup, not measured).
func fillWorkers(b *testing.B, srv *bus.Server, n int) {
	nc, err := srv.Connect("fill")
	require.NoError(b, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(b, err)
	val := []byte(`{"facts":"` + strings.Repeat("x", benchEntry-13) + `"}`)
	for i := range n {
		_, err := js.PublishAsync(fmt.Sprintf("$KV.%s.host%05d", bus.BucketWorkers, i), val)
		require.NoError(b, err)
		if i%500 == 499 || i == n-1 { // in windows: the client stalls past 4,000 in flight
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("publishes not acknowledged within a minute")
			}
		}
	}
}

// BenchmarkScan10000 reads a workers bucket of 10,000 entries of 5 KB in
// one scan (what `manifold fleet` does), against BenchmarkKeysGet10000,
// the Keys and a Get per key `manifold workers` does.
func BenchmarkScan10000(b *testing.B) {
	srv, bb := bustest.Start(b, bus.Config{WorkerTTL: time.Hour})
	fillWorkers(b, srv, 10_000)
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		n := 0
		if err := bb.Scan(ctx, bb.Workers(), func(bus.Entry) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		if n != 10_000 {
			b.Fatalf("scanned %d entries, want 10000", n)
		}
	}
}

func BenchmarkKeysGet10000(b *testing.B) {
	srv, bb := bustest.Start(b, bus.Config{WorkerTTL: time.Hour})
	fillWorkers(b, srv, 10_000)
	ctx := context.Background()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		keys, err := bb.Workers().Keys(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range keys {
			if _, err := bb.Workers().Get(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
		if len(keys) != 10_000 {
			b.Fatalf("%d keys, want 10000", len(keys))
		}
	}
}

// reportCPU reports the process's CPU time per operation (user+system,
// the embedded server's included) when the returned func is called: on a
// loaded machine it varies less than wall time.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		b.ReportMetric(float64((cpu()-start).Milliseconds())/float64(b.N), "cpu-ms/op")
	}
}

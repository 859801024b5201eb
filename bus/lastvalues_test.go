package bus_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// TestLastValuesReadsInBatches: LastValues returns the current value and
// revision of every key asked for, past one batch of keys (2,100 keys:
// three requests), and leaves out keys deleted or never written.
func TestLastValuesReadsInBatches(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := t.Context()
	runs := b.Runs()
	const n = 2100
	keys := make([]string, 0, n+2)
	want := map[string]bus.Entry{}
	for i := range n {
		k := fmt.Sprintf("k%05d", i)
		rev, err := runs.Put(ctx, k, []byte("v"+k))
		require.NoError(t, err)
		if i%100 == 7 { // written again: its last value counts
			rev, err = runs.Put(ctx, k, []byte("w"+k))
			require.NoError(t, err)
		}
		keys = append(keys, k)
		want[k] = bus.Entry{Key: k, Value: []byte("v" + k), Revision: rev}
		if i%100 == 7 {
			want[k] = bus.Entry{Key: k, Value: []byte("w" + k), Revision: rev}
		}
	}
	require.NoError(t, runs.Delete(ctx, "k00003"))
	delete(want, "k00003")
	keys = append(keys, "missing")
	got, err := b.LastValues(ctx, runs, keys)
	require.NoError(t, err)
	require.Equal(t, len(want), len(got))
	for _, e := range got {
		require.Equal(t, want[e.Key], e, "key %s", e.Key)
		g, err := runs.Get(ctx, e.Key)
		require.NoError(t, err)
		require.Equal(t, g, e)
	}
	none, err := b.LastValues(ctx, runs, []string{"missing"})
	require.NoError(t, err)
	require.Empty(t, none)
	none, err = b.LastValues(ctx, runs, nil)
	require.NoError(t, err)
	require.Empty(t, none)
}

package bus_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// Reports and bundles are read chunk by chunk with direct gets: a report
// of several chunks comes back whole, a missing one is ErrNotFound, and a
// bundle past the size limit is refused before any chunk is read.
func TestObjectsReadWithDirectGets(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{MaxBundleBytes: 64 << 10})
	ctx := ctxT(t)

	report := bytes.Repeat([]byte("0123456789abcdef"), 40_000) // 640 KB: five chunks
	require.NoError(t, b.PutReport(ctx, "run-1", report))
	got, err := b.GetReport(ctx, "run-1")
	require.NoError(t, err)
	require.Equal(t, report, got)

	// Stored again (a resumed run ending twice): the newest copy is read.
	require.NoError(t, b.PutReport(ctx, "run-1", []byte(`{"status":"succeeded"}`)))
	got, err = b.GetReport(ctx, "run-1")
	require.NoError(t, err)
	require.Equal(t, `{"status":"succeeded"}`, string(got))

	_, err = b.GetReport(ctx, "run-2")
	require.ErrorIs(t, err, bus.ErrNotFound)

	small := bytes.Repeat([]byte{7}, 1000)
	name, err := b.PutBundle(ctx, small)
	require.NoError(t, err)
	got, err = b.GetBundle(ctx, name)
	require.NoError(t, err)
	require.Equal(t, small, got)

	require.NoError(t, b.PutObject(ctx, "other", "big", bytes.Repeat([]byte{1}, 100<<10)))
	_, err = b.GetBundle(ctx, "obj://other/big")
	require.ErrorIs(t, err, bus.ErrTooLarge)
	_, err = b.GetBundle(ctx, "obj://other/none")
	require.ErrorIs(t, err, bus.ErrNotFound)
}

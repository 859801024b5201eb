package bus_test

import (
	"bytes"
	"strings"
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

// A task larger than one message travels by reference: the message holds
// the fields that route and identify it, and ResolveTask gives back the
// whole task. One that fits is published as is.
func TestLargeTaskTravelsByReference(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{InlineMax: 4 << 10})
	ctx := ctxT(t)
	big := bus.Task{RunID: "r1", Task: 2, Attempt: 1, Pool: "default", TimeoutMS: 1000}
	big.Resource.Type, big.Resource.Name = "file", "/tmp/big"
	big.Resource.Properties = map[string]any{"content": strings.Repeat("x", 200<<10)}
	small := bus.Task{RunID: "r1", Task: 3, Attempt: 1, Pool: "default"}
	small.Resource.Type, small.Resource.Name = "file", "/tmp/small"
	require.NoError(t, b.PublishTaskAsync(ctx, big).Wait(ctx))
	require.NoError(t, b.PublishTaskAsync(ctx, small).Wait(ctx))

	c, err := b.TaskConsumer(ctx, "default")
	require.NoError(t, err)
	d, err := c.Next(ctx)
	require.NoError(t, err)
	require.Less(t, len(d.Data()), 1<<10, "the message is an envelope")
	var got bus.Task
	require.NoError(t, bus.Decode(d.Data(), &got))
	require.NotEmpty(t, got.Ref)
	require.Equal(t, "r1", got.RunID)
	require.Equal(t, 2, got.Task)
	full, err := b.ResolveTask(ctx, got)
	require.NoError(t, err)
	require.Empty(t, full.Ref)
	require.Equal(t, "file#/tmp/big", full.Resource.Ref())
	require.Equal(t, strings.Repeat("x", 200<<10), full.Resource.Properties["content"])

	d, err = c.Next(ctx)
	require.NoError(t, err)
	got = bus.Task{}
	require.NoError(t, bus.Decode(d.Data(), &got))
	require.Empty(t, got.Ref)
	require.Equal(t, "file#/tmp/small", got.Resource.Ref())
	same, err := b.ResolveTask(ctx, got)
	require.NoError(t, err)
	require.Equal(t, got, same)
}

// BenchmarkGetReport reads a stored report of a 10,000-host fan-out's
// size (60 MB compact: some 470 chunks, each a direct get's round trip).
func BenchmarkGetReport(b *testing.B) {
	_, bb := bustest.Start(b, bus.Config{})
	ctx := b.Context()
	report := bytes.Repeat([]byte("0123456789abcdef"), 60<<20/16)
	require.NoError(b, bb.PutReport(ctx, "run-1", report))
	b.SetBytes(int64(len(report)))
	for b.Loop() {
		got, err := bb.GetReport(ctx, "run-1")
		if err != nil || len(got) != len(report) {
			b.Fatalf("read %d bytes of %d: %v", len(got), len(report), err)
		}
	}
}

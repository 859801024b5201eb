package bus_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// streamSubjects counts the subjects stream keeps under filter.
func streamSubjects(t *testing.T, ctx context.Context, b *bus.Bus, stream, filter string) int {
	t.Helper()
	js, err := jetstream.New(b.Conn())
	require.NoError(t, err)
	s, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	require.NoError(t, err)
	return len(info.State.Subjects)
}

// A folded run's record, report and events are purged by subject: the
// streams keep no subject of them afterwards (a KV or object delete would
// keep a marker per run, for ever), the other runs' are untouched, and
// purging what is not there is not an error.
func TestPurgeLeavesNoSubject(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)

	for _, id := range []string{"root-a0", "root-a1"} {
		require.NoError(t, b.PutReport(ctx, id, bytes.Repeat([]byte("x"), 300<<10))) // three chunks
		_, err := b.Runs().Put(ctx, "run."+id, []byte(`{}`))
		require.NoError(t, err)
		for _, k := range []bus.EventKind{bus.EventRunStarted, bus.EventTaskFinished, bus.EventRunFinished} {
			require.NoError(t, b.PublishEvent(ctx, bus.Event{Kind: k, RunID: id, RootRunID: "root"}))
		}
	}
	obj := "OBJ_" + bus.BucketReports
	require.Equal(t, 2, streamSubjects(t, ctx, b, obj, "$O."+bus.BucketReports+".M.>"))
	require.Equal(t, 6, streamSubjects(t, ctx, b, bus.StreamEvents, "manifold.events.root.>"))

	require.NoError(t, b.PurgeReport(ctx, "root-a0"))
	require.NoError(t, b.PurgeKey(ctx, b.Runs(), "run.root-a0"))
	require.NoError(t, b.PurgeEvents(ctx, "root", "root-a0"))

	require.Equal(t, 1, streamSubjects(t, ctx, b, obj, "$O."+bus.BucketReports+".M.>"))
	require.Equal(t, 1, streamSubjects(t, ctx, b, obj, "$O."+bus.BucketReports+".C.>"), "chunks of the purged report remain")
	require.Equal(t, 1, streamSubjects(t, ctx, b, "KV_"+bus.BucketRuns, "$KV."+bus.BucketRuns+".>"))
	require.Equal(t, 3, streamSubjects(t, ctx, b, bus.StreamEvents, "manifold.events.root.>"))
	_, err := b.GetReport(ctx, "root-a0")
	require.ErrorIs(t, err, bus.ErrNotFound)
	got, err := b.GetReport(ctx, "root-a1")
	require.NoError(t, err)
	require.Len(t, got, 300<<10)

	// Again: nothing left to purge.
	require.NoError(t, b.PurgeReport(ctx, "root-a0"))
	require.NoError(t, b.PurgeKey(ctx, b.Runs(), "run.root-a0"))
	require.NoError(t, b.PurgeEvents(ctx, "root", "root-a0"))
}

// Reports are bounded by count and by age: the oldest go first, whole
// (chunks and description), each named to the caller; within the bounds
// nothing is removed.
func TestPruneReports(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	var ids []string
	for i := range 5 {
		id := "run-" + string(rune('a'+i))
		ids = append(ids, id)
		require.NoError(t, b.PutReport(ctx, id, bytes.Repeat([]byte{byte(i)}, (i+1)*100<<10)))
	}
	var removed []string
	collect := func(id string) { removed = append(removed, id) }

	n, err := b.PruneReports(ctx, 5, 0, 0, collect)
	require.NoError(t, err)
	require.Zero(t, n, "at the limit: nothing removed")

	n, err = b.PruneReports(ctx, 3, 0, 0, collect)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, ids[:2], removed, "the oldest first")
	for _, id := range ids[:2] {
		_, err := b.GetReport(ctx, id)
		require.ErrorIs(t, err, bus.ErrNotFound)
	}
	for i, id := range ids[2:] {
		got, err := b.GetReport(ctx, id)
		require.NoError(t, err)
		require.Len(t, got, (i+3)*100<<10)
	}
	obj := "OBJ_" + bus.BucketReports
	require.Equal(t, 3, streamSubjects(t, ctx, b, obj, "$O."+bus.BucketReports+".C.>"), "no chunk of a removed report is left")

	// Every message is older than a nanosecond: all go.
	n, err = b.PruneReports(ctx, 0, time.Nanosecond, 0, collect)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, ids, removed)
	require.Zero(t, streamSubjects(t, ctx, b, obj, ">"))
}

// Reports are bounded by size: the oldest go until the store holds at most
// the bound, and the bytes bound never removes the last report left.
func TestPruneReportsBySize(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	var ids []string
	for i := range 4 {
		id := "run-" + string(rune('a'+i))
		ids = append(ids, id)
		require.NoError(t, b.PutReport(ctx, id, bytes.Repeat([]byte{byte(i)}, 200<<10)))
	}
	var removed []string
	collect := func(id string) { removed = append(removed, id) }

	n, err := b.PruneReports(ctx, 0, 0, 1<<20, collect)
	require.NoError(t, err)
	require.Zero(t, n, "800 KiB of reports under 1 MiB: nothing removed")

	// 500 KiB: two reports of 200 KiB and their descriptions fit, not three.
	n, err = b.PruneReports(ctx, 0, 0, 500<<10, collect)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, ids[:2], removed, "the oldest first")
	for _, id := range ids[2:] {
		got, err := b.GetReport(ctx, id)
		require.NoError(t, err)
		require.Len(t, got, 200<<10)
	}
	// Whole reports go: the chunks under the bound, their description too.
	obj := "OBJ_" + bus.BucketReports
	require.Equal(t, 2, streamSubjects(t, ctx, b, obj, "$O."+bus.BucketReports+".C.>"))
	require.Equal(t, 2, streamSubjects(t, ctx, b, obj, "$O."+bus.BucketReports+".M.>"))

	// A bound smaller than one report: the newest stays.
	n, err = b.PruneReports(ctx, 0, 0, 1, collect)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, ids[:3], removed)
	got, err := b.GetReport(ctx, ids[3])
	require.NoError(t, err)
	require.Len(t, got, 200<<10)
}

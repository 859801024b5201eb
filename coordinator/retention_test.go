package coordinator_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// TestReportsBoundedBySize: past Config.ReportsMaxBytes the oldest reports
// are removed with their runs' records, whole (no description left
// without its chunks); a bound smaller than one report keeps the newest.
func TestReportsBoundedBySize(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{coord: coordinator.Config{ReportsMaxBytes: 1, PruneInterval: time.Millisecond}})
	ctx := t.Context()
	var ids []string
	for range 4 {
		rep := tb.run(t, "resources: []\n")
		require.Equal(t, coordinator.RunSucceeded, rep.Status)
		ids = append(ids, rep.RunID)
	}
	obj := "OBJ_" + bus.BucketReports
	require.Eventually(t, func() bool {
		return len(subjects(t, ctx, tb.bus, obj, "$O."+bus.BucketReports+".M.>")) == 1 &&
			len(subjects(t, ctx, tb.bus, obj, "$O."+bus.BucketReports+".C.>")) == 1 &&
			len(subjects(t, ctx, tb.bus, "KV_"+bus.BucketRuns, "$KV."+bus.BucketRuns+".run.>")) == 1
	}, 20*time.Second, 20*time.Millisecond, "reports and records not bounded to the newest")
	for _, id := range ids[:3] {
		_, err := coordinator.GetReport(ctx, tb.bus, id)
		require.ErrorIs(t, err, bus.ErrNotFound, "run %s", id)
	}
	rep, err := coordinator.GetReport(ctx, tb.bus, ids[3])
	require.NoError(t, err)
	require.Equal(t, coordinator.RunSucceeded, rep.Status)
}

// The reports store is bounded by size by default.
func TestReportsMaxBytesDefault(t *testing.T) {
	require.Equal(t, coordinator.DefaultReportsMaxBytes, coordinator.Config{}.WithDefaults().ReportsMaxBytes)
	require.Equal(t, int64(10<<30), coordinator.DefaultReportsMaxBytes)
}

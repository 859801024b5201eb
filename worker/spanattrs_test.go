package worker_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/tracetest"
	"github.com/manifold-run/manifold/worker"
)

// TestUnrecordedSpansGetNoAttributes: a resource's span that records
// nothing is given no attributes (16 per resource were built for nothing
// before, 2 are left); a recording one still has them all (coordinator's
// TestTraceSpanTree, e2e TestTraceAcrossProcesses).
func TestUnrecordedSpansGetNoAttributes(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("owner root on the test's files needs root")
	}
	p := &tracetest.AttrCounter{Prefix: "execute"}
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{TracerProvider: p})
	const n = 10
	rs := convergedFiles(t, t.TempDir(), n)
	tb.publish(t, tb.segment(rs...))
	for range rs {
		require.Equal(t, bus.TaskStable, tb.next(t).Status)
	}
	require.Equal(t, int64(n), p.Spans(), "one span per resource")
	// 16 per resource before; the batch's size (batch.go) is still set.
	require.LessOrEqual(t, p.Attrs(), int64(n), "attributes given to spans that record nothing")
	require.Zero(t, p.Names(), "names given to spans that record nothing")
}

package coordinator_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/internal/tracetest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// TestUnrecordedResourceSpansGetNoAttributes: the coordinator's span of a
// resource that records nothing is given no attributes (6 per resource
// were built for nothing before); a recording one still has them all
// (TestTraceSpanTree, e2e TestTraceAcrossProcesses).
func TestUnrecordedResourceSpansGetNoAttributes(t *testing.T) {
	t.Parallel()
	_, b := bustest.Start(t, bus.Config{})
	p := &tracetest.AttrCounter{Prefix: "resource"}
	c, err := coordinator.New(coordinator.Config{Bus: b, Logger: testLogger(t), TracerProvider: p, Name: "coord-test"})
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(func() { within(t, "coordinator Stop", c.Stop) })
	w, err := worker.New(worker.Config{Bus: b, Registry: builtin.Registry(), Name: "worker-test", Concurrency: 2,
		Logger: testLogger(t), TracerProvider: p})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() { within(t, "worker Kill", w.Kill) })
	tb := &testBundle{bus: b, coord: c, worker: w}

	const n = 5
	m := "resources:\n"
	for i := range n {
		m += fmt.Sprintf("  - {type: exec, name: e%d, command: /bin/true}\n", i)
	}
	rep := tb.run(t, m)
	require.Equal(t, n, rep.Counts.Changed)
	require.Equal(t, int64(n), p.Spans(), "one resource span per resource")
	require.Zero(t, p.Attrs(), "attributes given to spans that record nothing")
	require.Zero(t, p.Names(), "names given to spans that record nothing")
}

package coordinator_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// pointOf returns the value of an int64 sum or gauge point (a histogram's count) of name whose
// attributes include want.
func pointOf(t *testing.T, rm metricdata.ResourceMetrics, name string, want ...attribute.KeyValue) (float64, bool) {
	t.Helper()
	match := func(set attribute.Set) bool {
		for _, kv := range want {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						return float64(p.Value), true
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						return float64(p.Value), true
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						return float64(p.Count), true
					}
				}
			}
		}
	}
	return 0, false
}

func TestMetrics(t *testing.T) {
	srv, b := bustest.Start(t, bus.Config{})
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	c, err := coordinator.New(coordinator.Config{Bus: b, Logger: testLogger(t), MeterProvider: mp})
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(c.Stop)
	w, err := worker.New(worker.Config{Bus: bustest.Open(t, srv, bus.Config{}), Registry: builtin.Registry(),
		Logger: testLogger(t), MeterProvider: mp, Name: "w1"})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(w.Kill)

	tb := &testBundle{srv: srv, bus: b}
	runID := tb.submit(t, `
ordering: graph
resources:
  - {type: exec, name: ok, command: /bin/true}
  - {type: exec, name: bad, command: /bin/false}
  - {type: exec, name: waits, command: /bin/true, target: nobody, timeout: 1h}
`)
	finished := 0
	waitForEvent(t, b, runID, func(ev bus.Event) bool {
		if ev.Kind == bus.EventTaskFinished {
			finished++
		}
		return finished == 2
	})
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(t.Context(), &rm))
	v, ok := pointOf(t, rm, "manifold.tasks", attribute.String("type", "exec"), attribute.String("status", "failed"))
	require.True(t, ok)
	require.Equal(t, 1.0, v)
	v, _ = pointOf(t, rm, "manifold.tasks", attribute.String("type", "exec"), attribute.String("status", "changed"))
	require.Equal(t, 1.0, v)
	for _, status := range []string{"changed", "failed"} {
		v, _ = pointOf(t, rm, "manifold.task.duration", attribute.String("type", "exec"), attribute.String("pool", "default"),
			attribute.String("status", status))
		require.Equal(t, 1.0, v, "one %s task timed in pool default", status)
	}
	v, ok = pointOf(t, rm, "manifold.worker.inflight", attribute.String("worker", "w1"))
	require.True(t, ok)
	require.Equal(t, 0.0, v)
	// The task of a pool no worker serves waits in its queue.
	v, ok = pointOf(t, rm, "manifold.queue.backlog", attribute.String("pool", "nobody"))
	require.True(t, ok, "backlog of pool nobody observed")
	require.Equal(t, 1.0, v)
}

package worker

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/manifold-run/manifold/bus"
)

// metrics are the worker's instruments; labels stay low-cardinality.
type metrics struct {
	duration     metric.Float64Histogram
	inflight     metric.Int64UpDownCounter
	redeliveries metric.Int64Counter
	worker       attribute.KeyValue
}

func newMetrics(mp metric.MeterProvider, name string) (*metrics, error) {
	meter := mp.Meter("github.com/manifold-run/manifold/worker")
	m := &metrics{worker: attribute.String("worker", name)}
	var err error
	if m.duration, err = meter.Float64Histogram("manifold.task.duration", metric.WithUnit("s"),
		metric.WithDescription("Execution time of tasks, by resource type, status and pool.")); err != nil {
		return nil, err
	}
	if m.inflight, err = meter.Int64UpDownCounter("manifold.worker.inflight", metric.WithUnit("{task}"),
		metric.WithDescription("Tasks a worker is executing.")); err != nil {
		return nil, err
	}
	if m.redeliveries, err = meter.Int64Counter("manifold.task.redeliveries", metric.WithUnit("{delivery}"),
		metric.WithDescription("Task deliveries after the first (a worker died or was too slow to ack).")); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) started(pool string, delivery int) {
	attrs := metric.WithAttributes(m.worker, attribute.String("pool", pool))
	m.inflight.Add(context.Background(), 1, attrs)
	if delivery > 1 {
		m.redeliveries.Add(context.Background(), 1, metric.WithAttributes(attribute.String("pool", pool)))
	}
}

func (m *metrics) finished(pool, typ string, o bus.Outcome) {
	m.inflight.Add(context.Background(), -1, metric.WithAttributes(m.worker, attribute.String("pool", pool)))
	m.duration.Record(context.Background(), float64(o.DurationMS)/1000, metric.WithAttributes(
		attribute.String("type", typ), attribute.String("status", string(o.Status)), attribute.String("pool", pool)))
}

// notRun ends the count of a task counted as started that was not executed
// (a batch ended before it).
func (m *metrics) notRun(pool string) {
	m.inflight.Add(context.Background(), -1, metric.WithAttributes(m.worker, attribute.String("pool", pool)))
}

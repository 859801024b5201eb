package worker

import (
	"context"
	"sync"

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

	// The attribute sets of the measurements, made once per pool and per
	// (type, status, pool): a converged run records two measurements per
	// resource, and building a set sorts and copies its attributes.
	// They are kept as the option lists the instruments take, so that a
	// measurement allocates no list of its own.
	poolSets   sync.Map // pool -> []metric.AddOption
	resultSets sync.Map // durationKey -> []metric.RecordOption
}

// durationKey names the attributes of a duration measurement.
type durationKey struct{ typ, status, pool string }

// ofPool returns the options of the worker's inflight count in pool.
func (m *metrics) ofPool(pool string) []metric.AddOption {
	if o, ok := m.poolSets.Load(pool); ok {
		return o.([]metric.AddOption)
	}
	o := []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(m.worker, attribute.String("pool", pool)))}
	m.poolSets.Store(pool, o)
	return o
}

// ofResult returns the options of a task's duration.
func (m *metrics) ofResult(typ string, status bus.TaskStatus, pool string) []metric.RecordOption {
	k := durationKey{typ: typ, status: string(status), pool: pool}
	if o, ok := m.resultSets.Load(k); ok {
		return o.([]metric.RecordOption)
	}
	o := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("type", typ), attribute.String("status", string(status)),
		attribute.String("pool", pool)))}
	m.resultSets.Store(k, o)
	return o
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
	m.inflight.Add(context.Background(), 1, m.ofPool(pool)...)
	if delivery > 1 {
		m.redeliveries.Add(context.Background(), 1, metric.WithAttributes(attribute.String("pool", pool)))
	}
}

func (m *metrics) finished(pool, typ string, o bus.Outcome) {
	m.inflight.Add(context.Background(), -1, m.ofPool(pool)...)
	m.duration.Record(context.Background(), float64(o.DurationMS)/1000, m.ofResult(typ, o.Status, pool)...)
}

// notRun ends the count of a task counted as started that was not executed
// (a batch ended before it).
func (m *metrics) notRun(pool string) {
	m.inflight.Add(context.Background(), -1, m.ofPool(pool)...)
}

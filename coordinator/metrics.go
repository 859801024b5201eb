package coordinator

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/manifold-run/manifold/bus"
)

// metrics are the coordinator's instruments. Labels stay low-cardinality
// (status, type, pool); run IDs and resource names live on spans.
type metrics struct {
	runs  metric.Int64Counter
	tasks metric.Int64Counter
	depth metric.Int64Histogram
	// refused counts history facts dropped unapplied (see verifyFact).
	refused metric.Int64Counter
	// taskAttrs holds the attribute option of each taskLabels.
	taskAttrs sync.Map
}

func newMetrics(mp metric.MeterProvider, b *bus.Bus) (*metrics, error) {
	meter := mp.Meter("github.com/manifold-run/manifold/coordinator")
	m := &metrics{}
	var err error
	if m.runs, err = meter.Int64Counter("manifold.runs", metric.WithDescription("Runs ended, by status."),
		metric.WithUnit("{run}")); err != nil {
		return nil, err
	}
	if m.tasks, err = meter.Int64Counter("manifold.tasks", metric.WithDescription("Tasks ended, by resource type and status."),
		metric.WithUnit("{task}")); err != nil {
		return nil, err
	}
	if m.depth, err = meter.Int64Histogram("manifold.apply.depth", metric.WithDescription("Depth of child runs started by apply resources."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 4, 5, 6, 8, 10, 15, 20)); err != nil {
		return nil, err
	}
	if m.refused, err = meter.Int64Counter("manifold.outcomes.refused",
		metric.WithDescription("History facts (outcomes, deadlines, cancellations) refused for a missing or invalid MAC, by reason."),
		metric.WithUnit("{fact}")); err != nil {
		return nil, err
	}
	backlog, err := meter.Int64ObservableGauge("manifold.queue.backlog",
		metric.WithDescription("Tasks published to a pool and not yet finished by a worker."), metric.WithUnit("{task}"))
	if err != nil {
		return nil, err
	}
	age, err := meter.Float64ObservableGauge("manifold.queue.age",
		metric.WithDescription("Age of the oldest task waiting in a pool's queue."), metric.WithUnit("s"))
	if err != nil {
		return nil, err
	}
	_, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		bls, err := b.Backlogs(ctx)
		if err != nil {
			return err
		}
		for _, bl := range bls {
			pool := metric.WithAttributes(attribute.String("pool", bl.Pool))
			o.ObserveInt64(backlog, int64(bl.Tasks), pool)
			if !bl.Oldest.IsZero() {
				o.ObserveFloat64(age, time.Since(bl.Oldest).Seconds(), pool)
			}
		}
		return nil
	}, backlog, age)
	return m, err
}

func (m *metrics) runEnded(status RunStatus) {
	m.runs.Add(context.Background(), 1, metric.WithAttributes(attribute.String("status", string(status))))
}

func (m *metrics) taskEnded(typ string, status bus.TaskStatus) {
	k := taskLabels{typ, status}
	opt, ok := m.taskAttrs.Load(k)
	if !ok {
		// Made once per (type, status): resource types and statuses are
		// closed sets, so the map stays small.
		opt, _ = m.taskAttrs.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(attribute.String("type", typ), attribute.String("status", string(status)))))
	}
	m.tasks.Add(context.Background(), 1, opt.(metric.AddOption))
}

// taskLabels are the labels of manifold.tasks.
type taskLabels struct {
	typ    string
	status bus.TaskStatus
}

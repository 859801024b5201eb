package coordinator_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	nooptrace "go.opentelemetry.io/otel/trace/noop"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// attrCounter is a tracer provider whose spans record nothing (as with no
// exporter) and count the attributes given to the resource spans.
type attrCounter struct {
	embedded.TracerProvider
	spans, attrs atomic.Int64
}

func (p *attrCounter) Tracer(string, ...trace.TracerOption) trace.Tracer { return counterTracer{p: p} }

type counterTracer struct {
	embedded.Tracer
	p *attrCounter
}

func (t counterTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, s := nooptrace.NewTracerProvider().Tracer("").Start(ctx, name)
	if !strings.HasPrefix(name, "resource ") {
		return ctx, s
	}
	t.p.spans.Add(1)
	cfg := trace.NewSpanStartConfig(opts...)
	t.p.attrs.Add(int64(len(cfg.Attributes())))
	return ctx, counterSpan{Span: s, p: t.p}
}

type counterSpan struct {
	trace.Span
	p *attrCounter
}

func (s counterSpan) SetAttributes(kv ...attribute.KeyValue) { s.p.attrs.Add(int64(len(kv))) }

// TestUnrecordedResourceSpansGetNoAttributes: the coordinator's span of a
// resource that records nothing is given no attributes (6 per resource
// were built for nothing before); a recording one still has them all
// (TestTraceSpanTree, e2e TestTraceAcrossProcesses).
func TestUnrecordedResourceSpansGetNoAttributes(t *testing.T) {
	t.Parallel()
	_, b := bustest.Start(t, bus.Config{})
	p := &attrCounter{}
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
	require.Equal(t, int64(n), p.spans.Load(), "one resource span per resource")
	require.Zero(t, p.attrs.Load(), "attributes given to spans that record nothing")
}

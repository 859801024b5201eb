package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/internal/telemetry"
)

func TestPrometheusEndpointServesMetrics(t *testing.T) {
	m, err := telemetry.SetupMetrics(t.Context(), telemetry.MetricsConfig{ServiceName: "manifold-test", Listen: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	counter, err := otel.Meter("test").Int64Counter("manifold.runs")
	require.NoError(t, err)
	counter.Add(t.Context(), 2, metric.WithAttributes(attribute.String("status", "succeeded")))

	resp, err := http.Get("http://" + m.Addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `manifold_runs_total{`)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "manifold_runs_total{") {
			require.Contains(t, line, `status="succeeded"`)
			require.True(t, strings.HasSuffix(line, " 2"), line)
		}
	}
}

func TestTracingSetupWithoutEndpointExportsNothing(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	shutdown, err := telemetry.Setup(t.Context(), telemetry.Config{ServiceName: "manifold-test"})
	require.NoError(t, err)
	_, span := otel.Tracer("t").Start(t.Context(), "s")
	require.True(t, span.SpanContext().IsValid(), "spans have IDs even without an exporter")
	span.End()
	require.NoError(t, shutdown(t.Context()))
}

func TestTracingSetupRejectsUnknownProtocol(t *testing.T) {
	_, err := telemetry.Setup(t.Context(), telemetry.Config{Endpoint: "http://127.0.0.1:1", Protocol: "carrier-pigeon"})
	require.ErrorContains(t, err, `OTLP protocol "carrier-pigeon"`)
}

// Without an exporter spans keep the IDs reports, events, logs and the
// traceparent carry, and record nothing.
func TestTracingWithoutExporterRecordsNothing(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	shutdown, err := telemetry.Setup(t.Context(), telemetry.Config{ServiceName: "manifold-test"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = shutdown(context.Background()) })
	tracer := otel.Tracer("t")

	ctx, root := tracer.Start(t.Context(), "run")
	_, child := tracer.Start(ctx, "resource", trace.WithAttributes(attribute.String("manifold.resource", "file:/x")))
	require.False(t, root.IsRecording(), "no exporter: nothing records")
	require.False(t, child.IsRecording())
	rsc, csc := root.SpanContext(), child.SpanContext()
	require.True(t, rsc.IsValid() && csc.IsValid())
	require.True(t, rsc.IsSampled() && csc.IsSampled(), "the flag a recording provider sends")
	require.Equal(t, rsc.TraceID(), csc.TraceID())
	require.NotEqual(t, rsc.SpanID(), csc.SpanID())
	_, other := tracer.Start(t.Context(), "run")
	require.NotEqual(t, rsc.TraceID(), other.SpanContext().TraceID())
	_, fresh := tracer.Start(ctx, "root", trace.WithNewRoot())
	require.NotEqual(t, rsc.TraceID(), fresh.SpanContext().TraceID())

	// The traceparent goes on and comes back as with the SDK's provider.
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	require.Equal(t, "00-"+rsc.TraceID().String()+"-"+rsc.SpanID().String()+"-01", carrier["traceparent"])
	unsampled := propagation.MapCarrier{"traceparent": "00-" + rsc.TraceID().String() + "-" + rsc.SpanID().String() + "-00"}
	_, remote := tracer.Start(otel.GetTextMapPropagator().Extract(t.Context(), unsampled), "task")
	require.Equal(t, rsc.TraceID(), remote.SpanContext().TraceID())
	require.False(t, remote.SpanContext().IsSampled(), "a caller's decision is kept")

	// A resource's span costs its context and itself.
	attrs := trace.WithAttributes(attribute.String("manifold.resource", "file:/x"))
	allocs := testing.AllocsPerRun(200, func() {
		_, s := tracer.Start(ctx, "resource", attrs)
		s.SetAttributes(attribute.String("manifold.status", "stable"))
		s.End()
	})
	require.LessOrEqual(t, allocs, 5.0, "the SDK's recording span: 7")
}

// With an exporter (or a sampler asked for) spans record and export as before.
func TestTracingWithExporterRecords(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	shutdown, err := telemetry.Setup(t.Context(), telemetry.Config{ServiceName: "manifold-test", Exporter: exp})
	require.NoError(t, err)
	_, span := otel.Tracer("t").Start(t.Context(), "s")
	require.True(t, span.IsRecording())
	span.End()
	require.NoError(t, otel.GetTracerProvider().(interface{ ForceFlush(context.Context) error }).ForceFlush(t.Context()))
	require.Len(t, exp.GetSpans(), 1)
	require.NoError(t, shutdown(t.Context()))

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	shutdown, err = telemetry.Setup(t.Context(), telemetry.Config{ServiceName: "manifold-test"})
	require.NoError(t, err)
	_, span = otel.Tracer("t").Start(t.Context(), "s")
	require.True(t, span.IsRecording())
	span.End()
	require.NoError(t, shutdown(t.Context()))
}

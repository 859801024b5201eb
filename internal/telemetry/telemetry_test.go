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

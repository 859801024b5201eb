package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// MetricsConfig says where metrics go. With neither a listener nor an
// endpoint (nor OTEL_EXPORTER_OTLP_ENDPOINT), metrics are recorded by a
// provider that exports nothing.
type MetricsConfig struct {
	// ServiceName as in Config.
	ServiceName string
	// Listen serves Prometheus text on http://Listen/metrics. Port 0 picks
	// a free port (see the returned address).
	Listen string
	// Endpoint is an OTLP/HTTP endpoint for metrics (http://host:4318).
	// Empty means OTEL_EXPORTER_OTLP_ENDPOINT, if set.
	Endpoint string
	// Interval between OTLP exports. Defaults to 15s.
	Interval time.Duration
	// Attributes are added to the resource.
	Attributes []attribute.KeyValue
}

// Metrics is the running metrics setup.
type Metrics struct {
	// Addr is the Prometheus listener's address ("" without one).
	Addr string
	mp   *sdkmetric.MeterProvider
	srv  *http.Server
}

// SetupMetrics installs a global meter provider exporting to Prometheus
// and/or OTLP.
func SetupMetrics(ctx context.Context, cfg MetricsConfig) (*Metrics, error) {
	res, err := newResource(ctx, cfg.ServiceName, cfg.Attributes)
	if err != nil {
		return nil, err
	}
	opts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	m := &Metrics{}
	if cfg.Listen != "" {
		reg := promclient.NewRegistry()
		exp, err := prometheus.New(prometheus.WithRegisterer(reg))
		if err != nil {
			return nil, fmt.Errorf("telemetry: prometheus: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(exp))
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("telemetry: metrics listener: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		m.Addr = ln.Addr().String()
		go func() { _ = m.srv.Serve(ln) }()
	}
	endpoint := cmp.Or(cfg.Endpoint, os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	if endpoint != "" {
		if !strings.Contains(endpoint, "://") {
			endpoint = "http://" + endpoint
		}
		exp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(strings.TrimSuffix(endpoint, "/")+"/v1/metrics"))
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP metrics: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp,
			sdkmetric.WithInterval(cmp.Or(cfg.Interval, 15*time.Second)))))
	}
	m.mp = sdkmetric.NewMeterProvider(opts...)
	otel.SetMeterProvider(m.mp)
	return m, nil
}

// Shutdown flushes and stops exporting, and closes the listener.
func (m *Metrics) Shutdown(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	var errs []error
	if m.srv != nil {
		errs = append(errs, m.srv.Shutdown(ctx))
	}
	errs = append(errs, m.mp.Shutdown(ctx))
	return errors.Join(errs...)
}

// Package telemetry sets up OpenTelemetry tracing for manifold's processes
// from the standard OTEL_* environment and flags.
package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Config says where traces go. Empty fields fall back to the standard
// environment (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER).
type Config struct {
	// ServiceName is the default service name (manifold-cli,
	// manifold-coordinator, manifold-worker); OTEL_SERVICE_NAME wins.
	ServiceName string
	// Endpoint is an OTLP endpoint URL (http://host:4318 for HTTP,
	// host:4317 or http://host:4317 for gRPC). Empty means the environment;
	// with neither, spans get trace and span IDs (run reports, events and
	// logs carry them, the traceparent sent on is the same) but record
	// nothing and are not exported (unless OTEL_TRACES_SAMPLER is set: then
	// the SDK's provider makes them as before).
	Endpoint string
	// Protocol is "http/protobuf" (default) or "grpc".
	Protocol string
	// Attributes are added to the resource (host, worker id...).
	Attributes []attribute.KeyValue
	// Exporter replaces the OTLP exporter (tests).
	Exporter sdktrace.SpanExporter
}

// Setup installs a global tracer provider and the W3C propagators. The
// returned shutdown flushes pending spans within its context's deadline
// (5s when it has none).
func Setup(ctx context.Context, cfg Config) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	res, err := newResource(ctx, cfg.ServiceName, cfg.Attributes)
	if err != nil {
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	exp := cfg.Exporter
	if exp == nil {
		exp, err = otlpExporter(ctx, cfg)
		if err != nil {
			return nil, err
		}
	}
	if exp == nil && os.Getenv("OTEL_TRACES_SAMPLER") == "" {
		// Nothing reads the spans: give them IDs, record nothing.
		otel.SetTracerProvider(&idOnlyProvider{})
		return func(context.Context) error { return nil }, nil
	}
	if exp != nil {
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	return func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
		}
		return tp.Shutdown(ctx)
	}, nil
}

// newResource describes this process: service name (OTEL_SERVICE_NAME
// wins: WithFromEnv comes last), host name, the given attributes and
// OTEL_RESOURCE_ATTRIBUTES.
func newResource(ctx context.Context, service string, extra []attribute.KeyValue) (*resource.Resource, error) {
	host, _ := os.Hostname()
	attrs := append([]attribute.KeyValue{
		attribute.String("service.name", cmp.Or(service, "manifold")),
		attribute.String("host.name", host),
	}, extra...)
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

func otlpExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	endpoint := cmp.Or(cfg.Endpoint, os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	if endpoint == "" {
		return nil, nil
	}
	protocol := cmp.Or(cfg.Protocol, os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")
	switch protocol {
	case "grpc":
		host := strings.TrimPrefix(strings.TrimPrefix(endpoint, "http://"), "https://")
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(host)}
		if !strings.HasPrefix(endpoint, "https://") {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	case "http/protobuf", "http":
		if !strings.Contains(endpoint, "://") {
			endpoint = "http://" + endpoint
		}
		url := endpoint
		if cfg.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			url = strings.TrimSuffix(endpoint, "/") + "/v1/traces"
		}
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(url))
	default:
		return nil, fmt.Errorf("telemetry: OTLP protocol %q: want grpc or http/protobuf", protocol)
	}
}

// Package tracetest holds tracer providers for tests of what the engine
// gives its spans.
package tracetest

import (
	"context"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// AttrCounter is a tracer provider whose spans record nothing (as with no
// exporter) and that counts the spans whose name starts with Prefix, the
// attributes given to them, at their start and after, and the names they
// were given after their start.
type AttrCounter struct {
	embedded.TracerProvider
	// Prefix selects the spans counted ("resource", "execute").
	Prefix string

	spans, attrs, names atomic.Int64
}

// Spans is how many spans with the prefix were started.
func (p *AttrCounter) Spans() int64 { return p.spans.Load() }

// Attrs is how many attributes those spans were given.
func (p *AttrCounter) Attrs() int64 { return p.attrs.Load() }

// Names is how many names those spans were given after their start.
func (p *AttrCounter) Names() int64 { return p.names.Load() }

func (p *AttrCounter) Tracer(string, ...trace.TracerOption) trace.Tracer { return counterTracer{p: p} }

type counterTracer struct {
	embedded.Tracer
	p *AttrCounter
}

func (t counterTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, s := noop.NewTracerProvider().Tracer("").Start(ctx, name)
	if !strings.HasPrefix(name, t.p.Prefix) {
		return ctx, s
	}
	t.p.spans.Add(1)
	cfg := trace.NewSpanStartConfig(opts...)
	t.p.attrs.Add(int64(len(cfg.Attributes())))
	return ctx, counterSpan{Span: s, p: t.p}
}

type counterSpan struct {
	trace.Span
	p *AttrCounter
}

func (s counterSpan) SetAttributes(kv ...attribute.KeyValue) { s.p.attrs.Add(int64(len(kv))) }

func (s counterSpan) SetName(string) { s.p.names.Add(1) }

package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// idOnlyProvider is the tracer provider of a process whose spans go
// nowhere (no exporter configured): it gives every span the IDs the SDK
// would (the parent's trace ID or a new one, a new span ID, the sampled
// flag as the default parent-based always-on sampler sets it) and records
// nothing. Run reports, events and log lines carry those IDs, and the
// traceparent sent to other processes is the one a recording provider
// sends, so a worker that does export still links its spans under the
// caller's trace. The SDK's provider would fill and end a recording span
// per resource (about 5 µs and a dozen allocations) for no reader.
type idOnlyProvider struct {
	embedded.TracerProvider
}

func (p *idOnlyProvider) Tracer(string, ...trace.TracerOption) trace.Tracer {
	return idOnlyTracer{p: p}
}

type idOnlyTracer struct {
	embedded.Tracer
	p *idOnlyProvider
}

// Start returns a non-recording span with fresh IDs under ctx's span.
func (t idOnlyTracer) Start(ctx context.Context, _ string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	var parent trace.SpanContext
	if len(opts) == 0 {
		parent = trace.SpanContextFromContext(ctx)
	} else if cfg := trace.NewSpanStartConfig(opts...); !cfg.NewRoot() {
		parent = trace.SpanContextFromContext(ctx)
	}
	scc := trace.SpanContextConfig{SpanID: newSpanID(), TraceFlags: trace.FlagsSampled}
	if parent.TraceID().IsValid() {
		scc.TraceID = parent.TraceID()
		scc.TraceFlags = parent.TraceFlags()
		scc.TraceState = parent.TraceState()
	} else {
		binary.BigEndian.PutUint64(scc.TraceID[:8], rand.Uint64())
		binary.BigEndian.PutUint64(scc.TraceID[8:], rand.Uint64())
	}
	s := &idOnlySpan{sc: trace.NewSpanContext(scc), p: t.p}
	return trace.ContextWithSpan(ctx, s), s
}

func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// idOnlySpan is a span that has IDs and records nothing.
type idOnlySpan struct {
	embedded.Span
	sc trace.SpanContext
	p  *idOnlyProvider
}

func (s *idOnlySpan) End(...trace.SpanEndOption)              {}
func (s *idOnlySpan) AddEvent(string, ...trace.EventOption)   {}
func (s *idOnlySpan) AddLink(trace.Link)                      {}
func (s *idOnlySpan) IsRecording() bool                       { return false }
func (s *idOnlySpan) RecordError(error, ...trace.EventOption) {}
func (s *idOnlySpan) SpanContext() trace.SpanContext          { return s.sc }
func (s *idOnlySpan) SetStatus(codes.Code, string)            {}
func (s *idOnlySpan) SetName(string)                          {}
func (s *idOnlySpan) SetAttributes(...attribute.KeyValue)     {}
func (s *idOnlySpan) TracerProvider() trace.TracerProvider    { return s.p }

package bus

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// headerCarrier adapts NATS headers to OpenTelemetry propagation. NATS
// headers are case-sensitive while W3C keys are case-insensitive: Get looks
// keys up regardless of case and Set writes lowercase keys, so a
// `traceparent` from any client is found.
type headerCarrier nats.Header

var _ propagation.TextMapCarrier = headerCarrier{}

func (c headerCarrier) Get(key string) string {
	if v := nats.Header(c).Get(key); v != "" {
		return v
	}
	for k, vs := range c {
		if strings.EqualFold(k, key) && len(vs) > 0 {
			return vs[0]
		}
	}
	return ""
}

func (c headerCarrier) Set(key, value string) {
	c[strings.ToLower(key)] = []string{value}
}

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// propagator is W3C trace context and baggage, whatever the process's
// global propagator is: the bus contract says every message carries
// traceparent.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// InjectTrace writes the trace context of ctx into h (W3C traceparent and
// tracestate, lowercase keys).
func InjectTrace(ctx context.Context, h nats.Header) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || sc.TraceState().Len() > 0 || baggage.FromContext(ctx).Len() > 0 {
		propagator.Inject(ctx, headerCarrier(h))
		return
	}
	// A span context alone: its traceparent, the one of the last span
	// context injected when it is that one again (a run's events all carry
	// their run span's: 40,000 of them in a 20,000-file apply).
	if last := lastTraceparent.Load(); last != nil && last.sc.Equal(sc) {
		h["traceparent"] = []string{last.tp}
		return
	}
	var c traceparentCarrier
	propagation.TraceContext{}.Inject(ctx, &c)
	lastTraceparent.Store(&injected{sc: sc, tp: string(c)})
	h["traceparent"] = []string{string(c)}
}

// injected is a span context and its traceparent.
type injected struct {
	sc trace.SpanContext
	tp string
}

// lastTraceparent is the span context InjectTrace injected last.
var lastTraceparent atomic.Pointer[injected]

// ExtractTrace returns ctx carrying the remote trace context found in h.
func ExtractTrace(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return propagator.Extract(ctx, headerCarrier(h))
}

// Traceparent returns the W3C traceparent of ctx's span ("" without one),
// for trace context carried in a message body (segment tasks).
func Traceparent(ctx context.Context) string {
	var c traceparentCarrier
	propagation.TraceContext{}.Inject(ctx, &c)
	return string(c)
}

// WithTraceparent returns ctx carrying the remote trace context of a
// traceparent string; ctx unchanged when tp is empty or invalid.
//
// What ExtractTrace of a header holding only tp gives, without the header
// (a map per call) or the baggage propagator, which has nothing to read in
// a traceparent: a segment's resources each carry one, and the worker
// reads it per resource (TestTraceparentAsHeaders).
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	if sc, ok := parseTraceparent00(tp); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	c := traceparentCarrier(tp)
	return propagation.TraceContext{}.Extract(ctx, &c)
}

// parseTraceparent00 reads a version-00 traceparent in lowercase hex
// ("00-<trace id>-<span id>-<flags>", 55 bytes) as the W3C propagator
// does, without its carrier and its empty tracestate; false for anything
// else (other versions, upper case, a zero ID, reserved flags), which the
// propagator reads.
func parseTraceparent00(tp string) (trace.SpanContext, bool) {
	if len(tp) != 55 || tp[0] != '0' || tp[1] != '0' || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanContext{}, false
	}
	var cfg trace.SpanContextConfig
	var flags [1]byte
	if !lowerHex(cfg.TraceID[:], tp[3:35]) || !lowerHex(cfg.SpanID[:], tp[36:52]) || !lowerHex(flags[:], tp[53:55]) || flags[0] > 3 {
		return trace.SpanContext{}, false
	}
	cfg.TraceFlags = trace.TraceFlags(flags[0]) & (trace.FlagsSampled | trace.FlagsRandom)
	cfg.Remote = true
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// lowerHex decodes s, lowercase hex of len(dst) bytes, into dst.
func lowerHex(dst []byte, s string) bool {
	for i := range dst {
		hi, lo := unhex(s[2*i]), unhex(s[2*i+1])
		if hi > 15 || lo > 15 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return 255
}

// traceparentCarrier holds a traceparent alone.
type traceparentCarrier string

func (c *traceparentCarrier) Get(key string) string {
	if strings.EqualFold(key, "traceparent") {
		return string(*c)
	}
	return ""
}

func (c *traceparentCarrier) Set(key, value string) {
	if strings.EqualFold(key, "traceparent") {
		*c = traceparentCarrier(value)
	}
}

func (c *traceparentCarrier) Keys() []string { return []string{"traceparent"} }

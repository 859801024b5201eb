package bus

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
)

// Traceparent and WithTraceparent give what injecting into and extracting
// from a message's headers give, for valid and invalid traceparents.
func TestTraceparentAsHeaders(t *testing.T) {
	for _, tp := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09", // reserved flag bits
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
		"garbage",
	} {
		want := trace.SpanContextFromContext(ExtractTrace(context.Background(), nats.Header{"traceparent": []string{tp}}))
		got := trace.SpanContextFromContext(WithTraceparent(context.Background(), tp))
		require.Equal(t, want, got, tp)
		if want.IsValid() {
			h := nats.Header{}
			ctx := trace.ContextWithSpanContext(context.Background(), want)
			InjectTrace(ctx, h)
			require.Equal(t, h.Get("traceparent"), Traceparent(ctx), tp)
			require.NotEmpty(t, Traceparent(ctx))
		}
	}
	require.Empty(t, Traceparent(context.Background()))
	require.Equal(t, context.Background(), WithTraceparent(context.Background(), ""))
}

func BenchmarkWithTraceparent(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		WithTraceparent(context.Background(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	}
}

// InjectTrace writes the headers the W3C propagators write, whether the
// span context is the one it injected last (its traceparent kept), another
// one, one with a tracestate, or a context with baggage.
func TestInjectTraceWritesWhatThePropagatorsWrite(t *testing.T) {
	sc := func(tid, sid string, flags trace.TraceFlags, state string) trace.SpanContext {
		t.Helper()
		var cfg trace.SpanContextConfig
		var err error
		cfg.TraceID, err = trace.TraceIDFromHex(tid)
		require.NoError(t, err)
		cfg.SpanID, err = trace.SpanIDFromHex(sid)
		require.NoError(t, err)
		cfg.TraceFlags = flags
		if state != "" {
			cfg.TraceState, err = trace.ParseTraceState(state)
			require.NoError(t, err)
		}
		return trace.NewSpanContext(cfg)
	}
	a := sc("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", trace.FlagsSampled, "")
	b := sc("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b8", 0, "")
	withState := sc("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", trace.FlagsSampled, "vendor=x")
	member, err := baggage.NewMember("user", "alice")
	require.NoError(t, err)
	bag, err := baggage.New(member)
	require.NoError(t, err)
	ctxs := []context.Context{
		context.Background(),
		trace.ContextWithSpanContext(context.Background(), a),
		trace.ContextWithSpanContext(context.Background(), a),
		trace.ContextWithSpanContext(context.Background(), b),
		trace.ContextWithSpanContext(context.Background(), a),
		trace.ContextWithSpanContext(context.Background(), withState),
		baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), a), bag),
		trace.ContextWithSpanContext(context.Background(), a),
	}
	for i, ctx := range ctxs {
		want := nats.Header{}
		propagator.Inject(ctx, headerCarrier(want))
		got := nats.Header{}
		InjectTrace(ctx, got)
		require.Equal(t, want, got, "context %d", i)
	}
}

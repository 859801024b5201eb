package bus

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
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

package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestOpenIsIdempotent(t *testing.T) {
	srv, _ := bustest.Start(t, bus.Config{})
	// A second Open against the same server provisions nothing new and
	// fails on nothing.
	b := bustest.Open(t, srv, bus.Config{})
	_, err := b.Runs().Put(ctxT(t), "k", []byte("v"))
	require.NoError(t, err)
}

func TestTaskRoundTripAndDuplicateDrop(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	task := bus.Task{RunID: "r1", Task: 3, Attempt: 1, Pool: "web", TimeoutMS: 1000}
	task.Resource.Type, task.Resource.Name = "file", "/tmp/x"
	require.NoError(t, b.PublishTask(ctx, task))
	require.NoError(t, b.PublishTask(ctx, task)) // same message ID: dropped by the stream

	c, err := b.TaskConsumer(ctx, "web")
	require.NoError(t, err)
	d, err := c.Next(ctx)
	require.NoError(t, err)
	var got bus.Task
	require.NoError(t, bus.Decode(d.Data(), &got))
	require.Equal(t, bus.Version, got.V)
	require.Equal(t, "file#/tmp/x", got.Resource.Ref())
	require.Equal(t, 1, d.Attempt)
	require.NoError(t, d.Ack(ctx))

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = c.Next(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the duplicate must have been dropped")
}

func TestRedeliveryCountsAttempts(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{TaskAckWait: 200 * time.Millisecond})
	ctx := ctxT(t)
	require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: "r", Task: 0, Attempt: 1, Pool: "p"}))
	c, err := b.TaskConsumer(ctx, "p")
	require.NoError(t, err)
	d1, err := c.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, d1.Attempt)
	// Not acked: the server redelivers after AckWait.
	d2, err := c.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, d2.Attempt)
	require.NoError(t, d2.Ack(ctx))
}

func TestPoolNamesAreTokens(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	err := b.PublishTask(ctxT(t), bus.Task{RunID: "r", Pool: "a.b"})
	require.ErrorContains(t, err, "may hold only letters")
	_, err = b.TaskConsumer(ctxT(t), "")
	require.ErrorContains(t, err, "must not be empty")
}

func TestBucketTranslatesErrors(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	kv := b.Runs()
	_, err := kv.Get(ctx, "missing")
	require.ErrorIs(t, err, bus.ErrNotFound)
	rev, err := kv.Create(ctx, "run", []byte("a"))
	require.NoError(t, err)
	_, err = kv.Create(ctx, "run", []byte("b"))
	require.ErrorIs(t, err, bus.ErrExists)
	rev2, err := kv.Update(ctx, "run", []byte("b"), rev)
	require.NoError(t, err)
	_, err = kv.Update(ctx, "run", []byte("c"), rev) // stale revision
	require.ErrorIs(t, err, bus.ErrRevisionMismatch)
	e, err := kv.Get(ctx, "run")
	require.NoError(t, err)
	require.Equal(t, "b", string(e.Value))
	require.Equal(t, rev2, e.Revision)
	keys, err := kv.Keys(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"run"}, keys)
}

func TestFollowEventsOfARunTree(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	require.NoError(t, b.PublishEvent(ctx, bus.Event{Kind: bus.EventRunStarted, RunID: "root"}))
	require.NoError(t, b.PublishEvent(ctx, bus.Event{Kind: bus.EventRunStarted, RunID: "child", RootRunID: "root"}))
	require.NoError(t, b.PublishEvent(ctx, bus.Event{Kind: bus.EventRunStarted, RunID: "other"}))
	require.NoError(t, b.PublishEvent(ctx, bus.Event{Kind: bus.EventRunFinished, RunID: "root"}))
	var seen []string
	err := b.FollowEvents(ctx, "root", func(ev bus.Event) bool {
		seen = append(seen, ev.RunID+"/"+string(ev.Kind))
		return ev.Kind != bus.EventRunFinished || ev.RunID != "root"
	})
	require.NoError(t, err)
	require.Equal(t, []string{"root/run_started", "child/run_started", "root/run_finished"}, seen)

	// Kinds: only the root run's events of those kinds.
	seen = nil
	err = b.FollowEvents(ctx, "root", func(ev bus.Event) bool {
		seen = append(seen, ev.RunID+"/"+string(ev.Kind))
		return ev.Kind != bus.EventRunFinished
	}, bus.EventRunRejected, bus.EventRunFinished)
	require.NoError(t, err)
	require.Equal(t, []string{"root/run_finished"}, seen)
}

func TestDecodeRejectsUnknownVersion(t *testing.T) {
	var task bus.Task
	err := bus.Decode([]byte(`{"v": 99}`), &task)
	require.True(t, errors.Is(err, bus.ErrVersion), err)
	require.ErrorContains(t, bus.Decode([]byte(`{`), &task), "decode message")
}

func TestTraceContextTravelsInLowercaseHeaders(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "client")
	defer span.End()
	h := nats.Header{}
	bus.InjectTrace(ctx, h)
	require.NotEmpty(t, h["traceparent"], "keys must be written lowercase: %v", h)

	// A header written by another client in another case is still found.
	other := nats.Header{"TraceParent": h["traceparent"]}
	got := trace.SpanContextFromContext(bus.ExtractTrace(context.Background(), other))
	require.Equal(t, span.SpanContext().TraceID(), got.TraceID())
}

// Messages are decoded once; the version still comes from the envelope,
// for struct targets (their V field) and others (maps) alike.
func TestDecodeReadsTheVersionOnce(t *testing.T) {
	var o bus.Outcome
	require.NoError(t, bus.Decode([]byte(`{"v":1,"run_id":"r","task":2}`), &o))
	require.Equal(t, "r", o.RunID)
	require.ErrorIs(t, bus.Decode([]byte(`{"v":7,"run_id":"r"}`), &o), bus.ErrVersion)
	// A newer version whose fields no longer fit: the version is named.
	require.ErrorIs(t, bus.Decode([]byte(`{"v":7,"run_id":["r"]}`), &o), bus.ErrVersion)
	var m map[string]any
	require.ErrorIs(t, bus.Decode([]byte(`{"v":7}`), &m), bus.ErrVersion)
	require.NoError(t, bus.Decode([]byte(`{"v":1,"x":2}`), &m))
}

package coordinator_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// TestOneTraceForARunTree checks the span tree of a run with a two-level
// apply: client → run → resource → execute → check/apply steps, and each
// child run under its apply resource's span, all in one trace.
func TestOneTraceForARunTree(t *testing.T) {
	srv, b := bustest.Start(t, bus.Config{})
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	c, err := coordinator.New(coordinator.Config{Bus: b, Logger: testLogger(t), TracerProvider: tp})
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	w, err := worker.New(worker.Config{Bus: bustest.Open(t, srv, bus.Config{}), Registry: builtin.Registry(),
		Logger: testLogger(t), TracerProvider: tp, Name: "w1"})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))

	dir := t.TempDir()
	bnd := bundle.New()
	require.NoError(t, bnd.Add("m.yaml", []byte(`
resources:
  - {type: apply, name: sub/m.yaml}
  - {type: exec, name: fails, command: /bin/false}
`)))
	require.NoError(t, bnd.Add("sub/m.yaml", []byte(`
resources:
  - {type: file, name: `+dir+`/a, content: "a\n"}
  - {type: apply, name: lib/m.yaml}
`)))
	require.NoError(t, bnd.Add("sub/lib/m.yaml", []byte(`
resources:
  - {type: exec, name: guarded, command: /bin/true, unless: /bin/false}
`)))
	archive, err := bnd.Archive()
	require.NoError(t, err)
	name, err := b.PutBundle(t.Context(), archive)
	require.NoError(t, err)

	ctx, client := tp.Tracer("test").Start(t.Context(), "client")
	req := bus.RunRequest{RunID: coordinator.NewRunID(), Bundle: name, Entry: "m.yaml", ManifestName: "m.yaml"}
	require.NoError(t, b.SubmitRun(ctx, req, req.RunID))
	tb := &testBundle{srv: srv, bus: b}
	rep, _ := tb.wait(t, req.RunID)
	client.End()
	w.Stop()
	c.Stop() // every span has ended once the run goroutines are gone
	require.Equal(t, coordinator.RunFailed, rep.Status)
	require.Equal(t, client.SpanContext().TraceID().String(), rep.TraceID)

	spans := exp.GetSpans().Snapshots()
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		require.Equal(t, client.SpanContext().TraceID(), s.SpanContext().TraceID(), "span %q is in another trace", s.Name())
		byID[s.SpanContext().SpanID().String()] = s
	}
	parentName := func(s sdktrace.ReadOnlySpan) string {
		if p, ok := byID[s.Parent().SpanID().String()]; ok {
			return p.Name()
		}
		return "client?"
	}
	find := func(name string) sdktrace.ReadOnlySpan {
		t.Helper()
		for _, s := range spans {
			if s.Name() == name {
				return s
			}
		}
		t.Fatalf("no span %q", name)
		return nil
	}
	attr := func(s sdktrace.ReadOnlySpan, key string) attribute.Value {
		for _, kv := range s.Attributes() {
			if string(kv.Key) == key {
				return kv.Value
			}
		}
		return attribute.Value{}
	}

	root := find("run m.yaml")
	require.Equal(t, client.SpanContext().SpanID(), root.Parent().SpanID())
	require.Equal(t, "run m.yaml", parentName(find("resource apply#sub/m.yaml")))
	require.Equal(t, "resource apply#sub/m.yaml", parentName(find("run sub/m.yaml")))
	sub := find("run sub/m.yaml")
	require.Equal(t, req.RunID, attr(sub, "manifold.parent_run_id").AsString())
	require.Equal(t, req.RunID, attr(sub, "manifold.root_run_id").AsString())
	require.Equal(t, int64(1), attr(sub, "manifold.depth").AsInt64())
	// A child run never outlasts the apply resource that waited for it.
	require.False(t, sub.EndTime().After(find("resource apply#sub/m.yaml").EndTime()))
	require.False(t, find("run lib/m.yaml").EndTime().After(find("resource apply#lib/m.yaml").EndTime()))
	require.Equal(t, "run sub/m.yaml", parentName(find("resource file#"+dir+"/a")))
	require.Equal(t, "resource file#"+dir+"/a", parentName(find("execute file#"+dir+"/a")))
	require.Equal(t, "resource apply#lib/m.yaml", parentName(find("run lib/m.yaml")))
	require.Equal(t, "run lib/m.yaml", parentName(find("resource exec#guarded")))
	exec := find("execute exec#guarded")
	require.Equal(t, "w1", attr(exec, "manifold.worker").AsString())
	require.Equal(t, "changed", attr(exec, "manifold.status").AsString())

	// The engine's steps and the commands they ran, guards included.
	var steps, commands []string
	for _, s := range spans {
		switch parentName(s) {
		case "execute exec#guarded":
			steps = append(steps, s.Name())
		case "check", "apply":
			if byID[s.Parent().SpanID().String()].Parent().SpanID() == exec.SpanContext().SpanID() {
				commands = append(commands, parentName(s)+"/"+s.Name())
			}
		}
	}
	require.ElementsMatch(t, []string{"check", "apply"}, steps)
	require.Contains(t, commands, "check/command false", "the unless guard runs in check")
	require.Contains(t, commands, "apply/command true")

	failed := find("execute exec#fails")
	require.Equal(t, codes.Error, failed.Status().Code)
	require.Equal(t, codes.Error, find("resource exec#fails").Status().Code)
	require.Equal(t, codes.Error, root.Status().Code)
	_ = context.Background
}

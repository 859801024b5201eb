package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/schemas"
	"github.com/manifold-run/manifold/worker"
)

// gated is a batch type whose check of a resource named "gate" waits for
// its gate to open: the test holds a segment in the middle of its checks.
type gated struct {
	name string
	gate <-chan struct{}
}

func (g *gated) Validate() error       { return nil }
func (g *gated) ConcurrentCheck() bool { return true }
func (g *gated) BatchKey(context.Context, *resources.Env) (string, error) {
	return "gated", nil
}

func (g *gated) CheckApply(ctx context.Context, _ *resources.Env, _ bool) (resources.Result, error) {
	if g.name == "gate" {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return resources.Result{}, context.Cause(ctx)
		}
	}
	return resources.Result{}, nil
}

func (g *gated) ApplyBatch(context.Context, *resources.Env, []resources.Batcher) ([]resources.Result, error) {
	panic("a converged batch applies nothing")
}

// TestConvergedSegmentIsAnsweredAsItIsChecked: the members of a segment
// whose checks decided their outcomes are answered as the segment goes,
// 64 at a time, not once every member is checked: here the 151st
// member's check cannot end before the test has read the outcomes of the
// 128 before it, in messages of 64 at most.
func TestConvergedSegmentIsAnsweredAsItIsChecked(t *testing.T) {
	t.Parallel()
	tb := setup(t, bus.Config{})
	gate := make(chan struct{})
	reg := builtin.Registry()
	reg.Register("gated", func(spec resources.Spec) (resources.Resource, error) {
		return &gated{name: spec.Name, gate: gate}, nil
	})
	w, err := worker.New(worker.Config{Bus: tb.bus, Registry: reg, Name: "w1", Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() { within(t, "Kill", w.Kill) })
	defer close(gate) // the check goes on if the test fails first

	secret, err := bus.NewRunSecret()
	require.NoError(t, err)
	const n = 200
	rs := make([]schemas.Resource, n)
	for i := range rs {
		rs[i] = schemas.Resource{Type: "gated", Name: "r" + strconv.Itoa(i)}
	}
	rs[150].Name = "gate"
	task := tb.signedSegment(t, secret, rs...)
	task.BatchOutcomes = true
	tb.publish(t, task)
	var got []bus.Outcome
	for len(got) < 128 {
		out := tb.nextOutcomes(t)
		require.LessOrEqual(t, len(out), 64)
		got = append(got, out...)
	}
	for i, o := range got {
		require.Equal(t, i, o.Task)
		require.Equal(t, bus.TaskStable, o.Status, "%+v", o)
		require.True(t, bus.VerifyOutcome(o, bus.TaskToken(secret, tb.runID, i, 1)), "outcome %d signed with its token", i)
	}
	gate <- struct{}{}
	for len(got) < n {
		got = append(got, tb.nextOutcomes(t)...)
	}
	for i, o := range got {
		require.Equal(t, i, o.Task)
		require.Equal(t, bus.TaskStable, o.Status, "%+v", o)
	}
}

// TestSegmentChangesAreAppliedTogether: in a segment of 200 files, two
// that need writing in one chunk of 64 are written as one batch (one
// "execute batch" span naming the 190 files from the first of them on,
// one "apply batch"); a lone one in a chunk (a drifted file among
// converged ones) is written alone as it is met, and the segment streams
// on: two of them 140 files apart make no batch at all.
func TestSegmentChangesAreAppliedTogether(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		drifted []int
		batched bool
	}{
		{"one chunk", []int{10, 20}, true},
		{"chunks apart", []int{10, 150}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			spans := tracetest.NewInMemoryExporter()
			tb := setup(t, bus.Config{})
			tb.start(t, worker.Config{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))})
			secret, err := bus.NewRunSecret()
			require.NoError(t, err)
			const n = 200
			rs := plainFiles(t, n)
			for _, i := range c.drifted {
				require.NoError(t, os.WriteFile(rs[i].Name, []byte("drifted\n"), 0o644))
			}
			task := tb.signedSegment(t, secret, rs...)
			task.BatchOutcomes = true
			tb.publish(t, task)
			var got []bus.Outcome
			for len(got) < n {
				got = append(got, tb.nextOutcomes(t)...)
			}
			for i, o := range got {
				require.Equal(t, i, o.Task)
				want := bus.TaskStable
				if slices.Contains(c.drifted, i) {
					want = bus.TaskChanged
				}
				require.Equal(t, want, o.Status, "%d: %+v", i, o)
				b, err := os.ReadFile(rs[i].Name)
				require.NoError(t, err)
				require.Equal(t, rs[i].Properties["content"], string(b))
			}
			var batches []tracetest.SpanStub
			applies := 0
			for _, s := range spans.GetSpans() {
				switch s.Name {
				case "execute batch":
					batches = append(batches, s)
				case "apply batch":
					applies++
				}
			}
			if !c.batched {
				require.Empty(t, batches, "lone changes are applied alone")
				require.Zero(t, applies)
				return
			}
			require.Len(t, batches, 1, "both writes in one batch")
			require.Equal(t, 1, applies)
			require.NotEmpty(t, batches[0].Links) // the SDK keeps 128 of them
			named := false
			for _, a := range batches[0].Attributes {
				if a.Key == "manifold.batch.refs" {
					refs := a.Value.AsStringSlice()
					require.Len(t, refs, n-c.drifted[0])
					require.Equal(t, "file#"+rs[c.drifted[0]].Name, refs[0])
					require.True(t, strings.HasSuffix(refs[c.drifted[1]-c.drifted[0]], filepath.Base(rs[c.drifted[1]].Name)))
					named = true
				}
			}
			require.True(t, named, "the batch names its resources")
		})
	}
}

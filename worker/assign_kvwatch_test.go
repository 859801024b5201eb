package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/resources/document"
	"github.com/manifold-run/manifold/worker"
)

// TestAssignmentWatchesKVDocument: a worker keeping an assignment with a
// kv:// document converged watches the document's entry — a hand edit of
// the entry is repaired by a drift run, with the assignment's interval an
// hour away (without the KV watch only that interval would see it).
func TestAssignmentWatchesKVDocument(t *testing.T) {
	t.Parallel()
	f := setupAssign(t)
	entry, err := f.tb.bus.EnsureDocumentBucket(t.Context(), "apps")
	require.NoError(t, err)
	b := bundle.New()
	require.NoError(t, b.Add("manifest.yaml", []byte(`
resources:
  - type: document
    name: kv://apps/web.config
    content: {port: 80}
`)))
	archive, err := b.Archive()
	require.NoError(t, err)
	a := bus.Assignment{Name: "kvdoc", Watch: true, Entry: "manifest.yaml", Pool: "web",
		IntervalMS: time.Hour.Milliseconds(), CreatedAt: time.Now().UTC()}
	a.Bundle, err = f.tb.bus.PutBundle(t.Context(), archive)
	require.NoError(t, err)
	_, err = f.tb.bus.PutAssignment(t.Context(), a)
	require.NoError(t, err)
	reg := builtin.RegistryWith(builtin.Config{Documents: document.Config{
		Buckets: document.BucketsFunc(func(ctx context.Context, name string) (document.KV, error) {
			return f.tb.bus.DocumentKV(ctx, name)
		}),
	}})
	w, err := worker.New(worker.Config{Bus: f.tb.bus, Registry: reg, Name: "w1", Pools: []string{"web"}, Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() { within(t, "Kill", w.Kill) })
	if st := f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return (m["kvdoc"].State == "converged" || m["kvdoc"].State == "failed") && m["kvdoc"].LastRun != ""
	})["kvdoc"]; st.State != "converged" {
		rep, err := coordinator.GetReport(t.Context(), f.tb.bus, st.LastRun)
		require.NoError(t, err)
		t.Fatalf("first run %s: %+v", st.State, rep)
	}
	first := f.state(t, "w1", func(map[string]worker.AssignmentStatus) bool { return true })["kvdoc"].LastRun

	ctx, cancel := context.WithTimeout(t.Context(), waitDeadline)
	defer cancel()
	_, rev, _, err := entry.Get(ctx, "web.config")
	require.NoError(t, err)
	_, ok, err := entry.Update(ctx, "web.config", []byte(`{"port": 9999}`), rev)
	require.NoError(t, err)
	require.True(t, ok)

	st := f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return m["kvdoc"].LastRun != first && m["kvdoc"].LastTrigger == "drift" && m["kvdoc"].State == "converged"
	})["kvdoc"]
	got, _, _, err := entry.Get(ctx, "web.config")
	require.NoError(t, err)
	require.JSONEq(t, `{"port": 80}`, string(got), "entry after the drift run %s", st.LastRun)
}

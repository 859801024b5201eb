package coordinator

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// TestFanOutApplyChildCompiledWithHostFacts: the child run of an apply
// resource inside a fan-out's child is compiled for the same host, with
// its facts: a name over facts renders there too.
func TestFanOutApplyChildCompiledWithHostFacts(t *testing.T) {
	t.Parallel()
	_, b := bustest.Start(t, bus.Config{})
	logger := slog.New(slog.DiscardHandler)
	c, err := New(Config{Bus: b, Logger: logger, Name: "fanout-apply"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	w, err := worker.New(worker.Config{Bus: b, Registry: builtin.Registry(), Name: "w1", Pools: []string{"web"}, Logger: logger,
		CacheDir: t.TempDir(), Facts: map[string]any{"node": "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Kill)

	out := t.TempDir()
	name, err := b.PutBundle(t.Context(), applyArchive(t, map[string]string{
		"site.yaml": "resources:\n  - apply:\n      - sub.yaml: {}\n",
		"sub.yaml": "hierarchy: {order: [\"node:{{ lookup('facts.node') }}\"]}\noverrides: {node:n1: {content: one}}\n" +
			"resources:\n  - file:\n      - \"" + out + "/{{ lookup('facts.node') }}.conf\": {content: \"{{ lookup('data.content') }}\"}\n",
	}))
	if err != nil {
		t.Fatal(err)
	}
	e := &applyEngine{bus: b}
	rep, _ := e.run(t, bus.RunRequest{Bundle: name, Entry: "site.yaml", ManifestName: "site.yaml", Pool: "web", EachWorker: true})
	if rep.Status != RunSucceeded {
		t.Fatalf("want succeeded, got %+v (w1: %+v)", rep, rep.Resources)
	}
	if got, err := os.ReadFile(filepath.Join(out, "n1.conf")); err != nil || string(got) != "one" {
		t.Fatalf("n1.conf = %q, %v; want one", got, err)
	}
}

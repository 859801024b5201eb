package coordinator_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// TestEachWorkerRunsTheManifestOncePerLiveWorker fans a run out over the
// workers of a pool: one child run per worker, pinned to it (its facts
// render the command), the parent report aggregating them.
func TestEachWorkerRunsTheManifestOncePerLiveWorker(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	for _, name := range []string{"w1", "w2"} {
		w, err := worker.New(worker.Config{Bus: bustest.Open(t, tb.srv, bus.Config{}), Registry: builtin.Registry(),
			Name: name, Pools: []string{"web"}, Logger: testLogger(t), Facts: map[string]any{"name": name}})
		require.NoError(t, err)
		require.NoError(t, w.Start(t.Context()))
		t.Cleanup(w.Kill)
	}
	// A worker of another pool is left out.
	other, err := worker.New(worker.Config{Bus: bustest.Open(t, tb.srv, bus.Config{}), Registry: builtin.Registry(),
		Name: "db1", Pools: []string{"db"}, Logger: testLogger(t), Facts: map[string]any{"name": "db1"}})
	require.NoError(t, err)
	require.NoError(t, other.Start(t.Context()))
	t.Cleanup(other.Kill)

	dir := t.TempDir()
	rep := tb.run(t, fmt.Sprintf(`
resources:
  - exec:
      - report:
          provider: shell
          command: "echo {{ lookup('facts.name') }} >> %s/log"
`, dir), func(r *bus.RunRequest) { r.EachWorker, r.Pool = true, "web" })
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
	require.Equal(t, []string{"apply#w1", "apply#w2"}, refs(rep))
	for _, r := range rep.Resources {
		require.Equal(t, "changed", r.Status)
		require.NotNil(t, r.Child)
		require.Equal(t, r.Name, r.Child.Resources[0].Worker, "the child run is pinned to its worker")
	}
	data, err := os.ReadFile(join(dir, "log"))
	require.NoError(t, err)
	got := strings.Fields(string(data))
	slices.Sort(got)
	require.Equal(t, []string{"w1", "w2"}, got, "once per worker of the pool, rendered with that worker's facts")

	rep = tb.run(t, "resources: []\n", func(r *bus.RunRequest) { r.EachWorker, r.Pool = true, "nobody" })
	require.Equal(t, coordinator.RunFailed, rep.Status)
	require.Contains(t, rep.Error, `no live worker in pool "nobody"`)
}

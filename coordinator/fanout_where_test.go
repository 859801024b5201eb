package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// fleetManifest appends each worker's name (its facts) to dir/log.
func fleetManifest(dir string) string {
	return fmt.Sprintf(`
resources:
  - exec:
      - report:
          provider: shell
          command: "echo {{ lookup('facts.name') }} >> %s/log"
`, dir)
}

// startFleetWorker starts a worker of pool web publishing facts (name is
// added).
func startFleetWorker(t *testing.T, tb *testBundle, name string, facts map[string]any) {
	t.Helper()
	facts["name"] = name
	w, err := worker.New(worker.Config{Bus: bustest.Open(t, tb.srv, bus.Config{}), Registry: builtin.Registry(),
		Name: name, Pools: []string{"web"}, Logger: testLogger(t), Facts: facts})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() { within(t, "worker Kill", w.Kill) })
}

// logged returns the names dir/log holds, sorted.
func logged(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(join(dir, "log"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	got := strings.Fields(string(data))
	slices.Sort(got)
	return got
}

// submitAPI submits req on runs.submit and returns the reply.
func submitAPI(t *testing.T, tb *testBundle, req bus.RunRequest) bus.SubmitReply {
	t.Helper()
	body, err := json.Marshal(req)
	require.NoError(t, err)
	msg, err := tb.bus.Conn().Request(bus.SubjectAPIRunsSubmit, body, runDeadline)
	require.NoError(t, err)
	var reply bus.SubmitReply
	require.NoError(t, json.Unmarshal(msg.Data, &reply), "%s", msg.Data)
	return reply
}

// TestWhereTargetsWorkersByFacts: a where over the workers' published
// facts fans the run out over the matching workers of the pool only (with
// or without each_worker); one matching none is refused by runs.submit
// naming the expression, and fails the run when queued.
func TestWhereTargetsWorkersByFacts(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	startFleetWorker(t, tb, "w1", map[string]any{"role": "web", "os": map[string]any{"family": "debian"}})
	startFleetWorker(t, tb, "w2", map[string]any{"role": "db", "os": map[string]any{"family": "debian"}})
	startFleetWorker(t, tb, "w3", map[string]any{"role": "db", "os": map[string]any{"family": "redhat"}})

	dir := t.TempDir()
	where := "facts.role == 'db' && facts.os.family == 'debian'"
	rep := tb.run(t, fleetManifest(dir), func(r *bus.RunRequest) { r.Pool, r.Where = "web", where })
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
	require.Equal(t, []string{"apply#w2"}, refs(rep), "where implies a fan-out over the matching workers")
	require.Equal(t, "w2", rep.Resources[0].Child.Resources[0].Worker)
	require.Equal(t, []string{"w2"}, logged(t, dir))

	dir = t.TempDir()
	rep = tb.run(t, fleetManifest(dir), func(r *bus.RunRequest) { r.Pool, r.EachWorker, r.Where = "web", true, "facts.role == 'db'" })
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
	require.Equal(t, []string{"apply#w2", "apply#w3"}, refs(rep))
	require.Equal(t, []string{"w2", "w3"}, logged(t, dir))

	none := "facts.role == 'cache'"
	reply := submitAPI(t, tb, bus.RunRequest{RunID: coordinator.NewRunID(), ManifestName: "m.yaml",
		ManifestYAML: fleetManifest(dir), Pool: "web", Where: none})
	require.NotNil(t, reply.Error, "%+v", reply)
	require.Equal(t, bus.APIInvalid, reply.Error.Code)
	require.Contains(t, reply.Error.Message, `where "facts.role == 'cache'" matches no live worker of pool "web" (of 3)`)

	rep = tb.run(t, fleetManifest(dir), func(r *bus.RunRequest) { r.Pool, r.Where = "web", none })
	require.Equal(t, coordinator.RunFailed, rep.Status)
	require.Contains(t, rep.Error, `where "facts.role == 'cache'" matches no live worker`)
	require.Equal(t, []string{"w2", "w3"}, logged(t, dir), "nothing ran")
}

// TestFanOutNamesTheSilentHosts: a worker registered in the pool that
// never answers (its entry is there, no process takes its tasks) is
// reported by name as "no answer" once the answer timeout passes, its
// child run is cancelled, the others succeed and the run fails listing it.
func TestFanOutNamesTheSilentHosts(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	startFleetWorker(t, tb, "w1", map[string]any{})
	startFleetWorker(t, tb, "w2", map[string]any{})
	silent, err := json.Marshal(map[string]any{"name": "w3", "pools": []string{"web"}, "concurrency": 1,
		"facts": map[string]any{"name": "w3"}})
	require.NoError(t, err)
	_, err = tb.bus.Workers().Put(t.Context(), "w3", silent)
	require.NoError(t, err)

	dir := t.TempDir()
	start := time.Now()
	rep := tb.run(t, fleetManifest(dir), func(r *bus.RunRequest) {
		r.Pool, r.EachWorker, r.AnswerTimeoutMS = "web", true, 1500
	})
	took := time.Since(start)
	require.Equal(t, coordinator.RunFailed, rep.Status, "%+v", rep)
	require.Less(t, took, 10*time.Second, "bounded by the answer timeout, not the task timeout")
	require.Equal(t, []string{"w3"}, rep.NoAnswer)
	require.Contains(t, rep.Error, "1 of 3 resources failed; no answer from w3")
	for _, r := range rep.Resources {
		if r.Name == "w3" {
			require.Equal(t, coordinator.NoAnswer, r.Status)
			require.Equal(t, "w3", r.Worker)
			require.Contains(t, r.Error, "no answer: worker w3 did not finish its child run within the answer timeout 1.5s")
			continue
		}
		require.Equal(t, "changed", r.Status, "%+v", r)
	}
	require.Equal(t, []string{"w1", "w2"}, logged(t, dir))

	// The silent host's child run is cancelled, not left waiting.
	child := rep.Resources[2].ChildRunID
	require.NotEmpty(t, child)
	ctx, cancel := context.WithTimeout(t.Context(), runDeadline)
	defer cancel()
	_, err = tb.bus.Runs().WaitFor(ctx, "run."+child, func(data []byte) bool {
		var h struct {
			Status coordinator.RunStatus `json:"status"`
		}
		return json.Unmarshal(data, &h) == nil && h.Status == coordinator.RunCancelled
	})
	require.NoError(t, err, "child run %s of the silent host not cancelled", child)
}

package worker_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

const motdManifest = `
data: {root: "{{ lookup('facts.root') }}"}
resources:
  - {type: file, name: "{{ data.root }}/motd", content: "managed\n"}
`

// assignFixture is a server, a coordinator and helpers to assign and to
// start workers of pool web.
type assignFixture struct {
	tb *testBundle
	// poll is the workers' ConvergePoll (zero: the default).
	poll time.Duration
}

func setupAssign(t *testing.T) *assignFixture {
	t.Helper()
	tb := setup(t, bus.Config{})
	c, err := coordinator.New(coordinator.Config{Bus: tb.bus, Name: "c1", Logger: testLogger(t)})
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(func() { within(t, "coordinator Stop", c.Stop) })
	return &assignFixture{tb: tb}
}

func (f *assignFixture) assign(t *testing.T, a bus.Assignment) uint64 {
	t.Helper()
	b := bundle.New()
	require.NoError(t, b.Add("manifest.yaml", []byte(motdManifest)))
	archive, err := b.Archive()
	require.NoError(t, err)
	a.Bundle, err = f.tb.bus.PutBundle(t.Context(), archive)
	require.NoError(t, err)
	a.Entry, a.Pool, a.IntervalMS, a.CreatedAt = "manifest.yaml", "web", time.Hour.Milliseconds(), time.Now().UTC()
	v, err := f.tb.bus.PutAssignment(t.Context(), a)
	require.NoError(t, err)
	return v
}

func (f *assignFixture) worker(t *testing.T, name, root string, facts map[string]any) *worker.Worker {
	t.Helper()
	if facts == nil {
		facts = map[string]any{}
	}
	facts["root"] = root
	w, err := worker.New(worker.Config{Bus: f.tb.bus, Registry: builtin.Registry(), Name: name, Pools: []string{"web"},
		Logger: testLogger(t), Facts: facts, ConvergePoll: f.poll})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() { within(t, "Kill", w.Kill) })
	return w
}

// state watches the worker's entry until ok holds for its assignments.
func (f *assignFixture) state(t *testing.T, name string, ok func(map[string]worker.AssignmentStatus) bool) map[string]worker.AssignmentStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitDeadline)
	defer cancel()
	var last map[string]worker.AssignmentStatus
	_, err := f.tb.bus.Workers().WaitFor(ctx, name, func(data []byte) bool {
		var reg worker.Registration
		if json.Unmarshal(data, &reg) != nil {
			return false
		}
		last = reg.Assignments
		return ok(last)
	})
	require.NoError(t, err, "worker %s: last assignments %+v", name, last)
	return last
}

// A worker takes only the assignments whose where holds on its facts.
func TestAssignmentWhereSelectsWorkers(t *testing.T) {
	t.Parallel()
	f := setupAssign(t)
	prodRoot, devRoot := t.TempDir(), t.TempDir()
	f.worker(t, "prod", prodRoot, map[string]any{"env": "prod"})
	f.worker(t, "dev", devRoot, map[string]any{"env": "dev"})
	f.assign(t, bus.Assignment{Name: "motd", Where: "facts.env == 'prod'", Watch: true})
	// A second assignment, for every worker, is the positive signal that
	// dev has read the first one by the time it converged this one.
	f.assign(t, bus.Assignment{Name: "all", Where: "", Watch: false})
	f.state(t, "prod", func(m map[string]worker.AssignmentStatus) bool {
		return m["motd"].State == "converged" && m["all"].State == "converged"
	})
	dev := f.state(t, "dev", func(m map[string]worker.AssignmentStatus) bool { return m["all"].State == "converged" })
	require.NotContains(t, dev, "motd")
	require.FileExists(t, filepath.Join(prodRoot, "motd"))
}

// A worker restarted after drift does a full check at start and repairs
// it; a noop assignment reports drift (drifted) and leaves it.
func TestAssignmentRestartedWorkerChecksAtStartAndNoopDrifts(t *testing.T) {
	t.Parallel()
	f := setupAssign(t)
	root := t.TempDir()
	w := f.worker(t, "w1", root, nil)
	f.assign(t, bus.Assignment{Name: "motd", Watch: true})
	f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool { return m["motd"].State == "converged" })
	within(t, "Stop", w.Stop)

	motd := filepath.Join(root, "motd")
	require.NoError(t, os.WriteFile(motd, []byte("edited while down\n"), 0o644))
	// A coordinator holds each request 1ms: the worker follows its runs
	// by long polls with the run ID.
	f.poll = time.Millisecond
	f.worker(t, "w1", root, nil)
	st := f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return m["motd"].State == "converged" && m["motd"].LastTrigger == "start"
	})
	got, err := os.ReadFile(motd)
	require.NoError(t, err)
	require.Equal(t, "managed\n", string(got))
	rep, err := coordinator.GetReport(t.Context(), f.tb.bus, st["motd"].LastRun)
	require.NoError(t, err)
	require.Equal(t, "start", rep.Trigger)
	require.Equal(t, 1, rep.Counts.Changed)

	// noop: the next version only reports the drift. The edit waits for
	// the worker to have taken that version (its first run done): made
	// earlier, the previous version's watch could still repair it.
	v2 := f.assign(t, bus.Assignment{Name: "motd", Watch: true, Noop: true})
	f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		s := m["motd"]
		return s.Version == v2 && s.LastTrigger == "change" && s.State == "converged"
	})
	require.NoError(t, os.WriteFile(motd, []byte("drift\n"), 0o644))
	f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool { return m["motd"].State == "drifted" })
	got, err = os.ReadFile(motd)
	require.NoError(t, err)
	require.Equal(t, "drift\n", string(got))
}

// Another writer fighting the assignment over a file makes it flapping:
// its repairs are backed off and the worker's entry names it.
func TestAssignmentFightIsFlapping(t *testing.T) {
	t.Parallel()
	f := setupAssign(t)
	root := t.TempDir()
	f.worker(t, "w1", root, nil)
	f.assign(t, bus.Assignment{Name: "motd", Watch: true})
	st := f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool { return m["motd"].State == "converged" })
	seen := map[string]bool{st["motd"].LastRun: true}
	motd := filepath.Join(root, "motd")
	var last worker.AssignmentStatus
	for i := 0; i < 8 && last.State != "flapping"; i++ {
		require.NoError(t, os.WriteFile(motd, []byte("the other writer\n"), 0o644))
		m := f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
			s := m["motd"]
			return s.State == "flapping" || s.State == "converged" && s.LastTrigger == "drift" && !seen[s.LastRun]
		})
		last = m["motd"]
		seen[last.LastRun] = true
	}
	require.Equal(t, "flapping", string(last.State))
	require.Equal(t, []string{"file#" + motd}, last.Flapping)
}

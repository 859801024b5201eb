package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// assignManifest keeps two files under the worker's own root (its fact
// "root", resolved into the data when the run is compiled for that
// worker), so workers on one host do not share them.
func assignManifest(content string) string {
	return fmt.Sprintf(`
data: {root: "{{ lookup('facts.root') }}"}
resources:
  - {type: file, name: "{{ data.root }}/a", content: %q}
  - {type: file, name: "{{ data.root }}/b", content: "b\n"}
`, content)
}

// assign uploads manifest as a bundle and stores it as assignment name of
// pool web, returning its version.
func (tb *testBundle) assign(t *testing.T, name, manifest string, mod ...func(*bus.Assignment)) uint64 {
	t.Helper()
	b := bundle.New()
	require.NoError(t, b.Add("manifest.yaml", []byte(manifest)))
	archive, err := b.Archive()
	require.NoError(t, err)
	ref, err := tb.bus.PutBundle(t.Context(), archive)
	require.NoError(t, err)
	a := bus.Assignment{Name: name, Bundle: ref, Entry: "manifest.yaml", ManifestName: "site.yaml", Pool: "web",
		Watch: true, IntervalMS: time.Hour.Milliseconds(), CreatedAt: time.Now().UTC(), By: "test"}
	for _, f := range mod {
		f(&a)
	}
	v, err := tb.bus.PutAssignment(t.Context(), a)
	require.NoError(t, err)
	return v
}

// startWorker starts a worker of pool web whose fact root is its own
// directory.
func (tb *testBundle) startWorker(t *testing.T, name string) (*worker.Worker, string) {
	t.Helper()
	root := t.TempDir()
	w, err := worker.New(worker.Config{Bus: tb.bus, Registry: builtin.Registry(), Name: name, Pools: []string{"web"},
		Concurrency: 2, Logger: testLogger(t), Facts: map[string]any{"root": root}})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() { within(t, "worker Kill", w.Kill) })
	waitSynced(t, w, name)
	return w, root
}

// waitSynced waits until worker w has read the stored assignments: those
// made from now on are taken as made (trigger assign), not as found at
// start.
func waitSynced(t *testing.T, w *worker.Worker, name string) {
	t.Helper()
	select {
	case <-w.AssignmentsSynced():
	case <-time.After(runDeadline):
		t.Fatalf("worker %s did not read the stored assignments within %s", name, runDeadline)
	}
}

// waitState watches worker's entry until ok holds for its state of the
// assignment (absent: nil) and returns that state.
func (tb *testBundle) waitState(t *testing.T, workerName, assignment string, ok func(*worker.AssignmentStatus) bool) *worker.AssignmentStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runDeadline)
	defer cancel()
	var last *worker.AssignmentStatus
	_, err := tb.bus.Workers().WaitFor(ctx, workerName, func(data []byte) bool {
		var reg worker.Registration
		if json.Unmarshal(data, &reg) != nil {
			return false
		}
		last = nil
		if st, found := reg.Assignments[assignment]; found {
			last = &st
		}
		return ok(last)
	})
	require.NoError(t, err, "worker %s, assignment %s: last state %+v", workerName, assignment, last)
	return last
}

// ranAfter returns a predicate: the assignment is at version v, converged,
// and its last run (not seen before) had trigger.
func ranAfter(v uint64, trigger string, seen map[string]bool) func(*worker.AssignmentStatus) bool {
	return func(st *worker.AssignmentStatus) bool {
		return st != nil && st.Version == v && st.State == "converged" && st.LastTrigger == trigger && !seen[st.LastRun]
	}
}

// repairedAfter returns a predicate: a drift run not seen before, at
// version v, changed something (drift runs that found nothing to repair
// are skipped: the run's own writes read late).
func (tb *testBundle) repairedAfter(t *testing.T, v uint64, seen map[string]bool) func(*worker.AssignmentStatus) bool {
	drift := ranAfter(v, "drift", seen)
	return func(st *worker.AssignmentStatus) bool {
		if !drift(st) {
			return false
		}
		seen[st.LastRun] = true
		rep, err := coordinator.GetReport(t.Context(), tb.bus, st.LastRun)
		return err == nil && rep.Counts.Changed > 0
	}
}

func refsOf(rep *coordinator.Report) []string {
	var out []string
	for _, r := range rep.Resources {
		out = append(out, r.Ref)
	}
	return out
}

func TestAssignmentConvergesRepairsDriftRollsOutAndUnassigns(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	_, root1 := tb.startWorker(t, "w1")
	seen := map[string]bool{}

	// assign: the live worker converges it (trigger assign).
	v1 := tb.assign(t, "site", assignManifest("v1\n"))
	st := tb.waitState(t, "w1", "site", ranAfter(v1, "assign", seen))
	seen[st.LastRun] = true
	requireContent(t, filepath.Join(root1, "a"), "v1\n")
	requireContent(t, filepath.Join(root1, "b"), "b\n")
	rep, err := coordinator.GetReport(t.Context(), tb.bus, st.LastRun)
	require.NoError(t, err)
	require.Equal(t, "assign", rep.Trigger)
	require.Equal(t, "site", rep.Assignment)
	require.Equal(t, v1, rep.AssignmentVersion)
	require.Len(t, rep.Resources, 2)

	// A worker joining later converges it too (trigger start).
	_, root2 := tb.startWorker(t, "w2")
	st2 := tb.waitState(t, "w2", "site", ranAfter(v1, "start", seen))
	seen[st2.LastRun] = true
	requireContent(t, filepath.Join(root2, "a"), "v1\n")

	// A hand edit is repaired by a drift run of that resource alone.
	// (A drift run that repaired nothing, of the run's own writes read
	// late, may come first: the predicate looks for the repair.)
	require.NoError(t, os.WriteFile(filepath.Join(root1, "a"), []byte("hand edit\n"), 0o644))
	st = tb.waitState(t, "w1", "site", tb.repairedAfter(t, v1, seen))
	requireContent(t, filepath.Join(root1, "a"), "v1\n")
	rep, err = coordinator.GetReport(t.Context(), tb.bus, st.LastRun)
	require.NoError(t, err)
	require.Equal(t, []string{"file#" + filepath.Join(root1, "a")}, refsOf(rep), "a repair run holds the drifted resource only")
	require.Equal(t, "changed", rep.Resources[0].Status)
	requireContent(t, filepath.Join(root2, "a"), "v1\n") // w2's file was never touched

	// Assigning again rolls the new version out at once (trigger change).
	v2 := tb.assign(t, "site", assignManifest("v2\n"))
	require.Greater(t, v2, v1)
	for _, w := range []string{"w1", "w2"} {
		st := tb.waitState(t, w, "site", ranAfter(v2, "change", seen))
		seen[st.LastRun] = true
	}
	requireContent(t, filepath.Join(root1, "a"), "v2\n")
	requireContent(t, filepath.Join(root2, "a"), "v2\n")

	// Every convergence is an ordinary run, listed with its trigger.
	runs, err := coordinator.ListRuns(t.Context(), tb.bus, 50)
	require.NoError(t, err)
	var triggers []string
	for _, r := range runs {
		if r.Assignment == "site" {
			triggers = append(triggers, r.Trigger)
		}
	}
	for _, want := range []string{"assign", "start", "drift", "change"} {
		require.Contains(t, triggers, want)
	}

	// unassign: the worker's state drops it; a later edit stays.
	require.NoError(t, tb.bus.DeleteAssignment(t.Context(), "site"))
	tb.waitState(t, "w1", "site", func(st *worker.AssignmentStatus) bool { return st == nil })
	require.NoError(t, os.WriteFile(filepath.Join(root1, "a"), []byte("mine now\n"), 0o644))
	// A positive signal that the worker would have seen the edit by now:
	// a new assignment of another file is converged after it.
	tb.assign(t, "other", `
data: {root: "{{ lookup('facts.root') }}"}
resources:
  - {type: file, name: "{{ data.root }}/c", content: "c\n"}
`)
	tb.waitState(t, "w1", "other", func(st *worker.AssignmentStatus) bool { return st != nil && st.State == "converged" })
	requireContent(t, filepath.Join(root1, "a"), "mine now\n")
	runs, err = coordinator.ListRuns(t.Context(), tb.bus, 50)
	require.NoError(t, err)
	repairs := 0
	for _, r := range runs {
		if r.Assignment == "site" && r.Trigger == "drift" && r.Counts.Changed > 0 {
			repairs++
		}
	}
	require.Equal(t, 1, repairs, "no repair after unassign")
}

func TestAssignmentCriticalHealthRemediates(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	_, root := tb.startWorker(t, "w1")
	flag := filepath.Join(root, "healthy")
	require.NoError(t, os.WriteFile(flag, nil, 0o644))
	v := tb.assign(t, "svc", `
data: {root: "{{ lookup('facts.root') }}"}
resources:
  - type: file
    name: "{{ data.root }}/conf"
    content: "x\n"
    health_checks:
      - {name: up, command: "test -e {{ facts.root }}/healthy || exit 2", tries: 1}
`, func(a *bus.Assignment) { a.HealthIntervalMS = 100 })
	tb.waitState(t, "w1", "svc", func(st *worker.AssignmentStatus) bool {
		return st != nil && st.Version == v && st.LastRun != "" && st.State == "converged"
	})
	remediations := func() int {
		runs, err := coordinator.ListRuns(t.Context(), tb.bus, 100)
		require.NoError(t, err)
		n := 0
		for _, r := range runs {
			if r.Trigger == "health" {
				rep, err := coordinator.GetReport(t.Context(), tb.bus, r.RunID)
				require.NoError(t, err)
				if !rep.HealthCheckOnly {
					n++
				}
			}
		}
		return n
	}
	require.Zero(t, remediations(), "no remediation while the checks are OK")
	// CRITICAL: a remediation run of the whole assignment.
	require.NoError(t, os.Remove(flag))
	st := tb.waitState(t, "w1", "svc", func(st *worker.AssignmentStatus) bool {
		if st == nil || st.LastTrigger != "health" {
			return false
		}
		rep, err := coordinator.GetReport(t.Context(), tb.bus, st.LastRun)
		return err == nil && !rep.HealthCheckOnly
	})
	rep, err := coordinator.GetReport(t.Context(), tb.bus, st.LastRun)
	require.NoError(t, err)
	require.Equal(t, "health", rep.Trigger)
	require.Equal(t, []string{"file#" + filepath.Join(root, "conf")}, refsOf(rep))
}

func TestConvergeRequestRefusesAnotherPoolAndVersion(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	w, err := worker.New(worker.Config{Bus: tb.bus, Registry: builtin.Registry(), Name: "other", Pools: []string{"db"},
		Logger: testLogger(t), DisableAssignments: true})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() { within(t, "worker Kill", w.Kill) })
	v := tb.assign(t, "site", assignManifest("v1\n"))
	ask := func(req bus.ConvergeRequest) *bus.APIError {
		data, _ := json.Marshal(req)
		msg, err := tb.bus.Conn().Request(bus.ConvergeSubject("other"), data, 10*time.Second)
		require.NoError(t, err)
		var rep bus.ConvergeReply
		require.NoError(t, json.Unmarshal(msg.Data, &rep))
		return rep.ErrorReply.Error
	}
	e := ask(bus.ConvergeRequest{Assignment: "site", Version: v, Trigger: "start"})
	require.NotNil(t, e)
	require.Contains(t, e.Message, "not in pool web")
	e = ask(bus.ConvergeRequest{Assignment: "site", Version: v + 7, Trigger: "start"})
	require.NotNil(t, e)
	require.Equal(t, bus.APIConflict, e.Code)
	e = ask(bus.ConvergeRequest{Assignment: "nope", Version: 1, Trigger: "start"})
	require.Equal(t, bus.APINotFound, e.Code)
	e = ask(bus.ConvergeRequest{Assignment: "site", Version: v, Trigger: "whenever"})
	require.Equal(t, bus.APIInvalid, e.Code)
	// A stored assignment of its pool whose where is false for it.
	pv := tb.assign(t, "prodonly", assignManifest("p\n"), func(a *bus.Assignment) { a.Pool, a.Where = "db", "facts.env == 'prod'" })
	e = ask(bus.ConvergeRequest{Assignment: "prodonly", Version: pv, Trigger: "start"})
	require.NotNil(t, e)
	require.Contains(t, e.Message, `where "facts.env == 'prod'"`)
	e = ask(bus.ConvergeRequest{Assignment: "site", Trigger: "start", RunID: "nope"})
	require.Equal(t, bus.APINotFound, e.Code)
	other := tb.submit(t, "resources: []\n")
	tb.wait(t, other)
	e = ask(bus.ConvergeRequest{Assignment: "site", Trigger: "start", RunID: other})
	require.NotNil(t, e)
	require.Contains(t, e.Message, "is not a convergence run of assignment site on worker other")
	runs, err := coordinator.ListRuns(t.Context(), tb.bus, 10)
	require.NoError(t, err)
	require.False(t, slices.ContainsFunc(runs, func(r bus.RunSummary) bool { return r.Assignment == "site" }), "no run started")
}

func requireContent(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, want, string(got))
}

// Convergence metrics: drift events by resource type, time from event to
// repaired outcome, repairs and runs by trigger.
func TestAssignmentMetrics(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	root := t.TempDir()
	w, err := worker.New(worker.Config{Bus: tb.bus, Registry: builtin.Registry(), Name: "w1", Pools: []string{"web"},
		Logger: testLogger(t), Facts: map[string]any{"root": root}, MeterProvider: mp})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() { within(t, "worker Kill", w.Kill) })
	waitSynced(t, w, "w1")
	seen := map[string]bool{}
	v := tb.assign(t, "site", assignManifest("v1\n"))
	st := tb.waitState(t, "w1", "site", ranAfter(v, "assign", seen))
	seen[st.LastRun] = true
	require.NoError(t, os.WriteFile(filepath.Join(root, "b"), []byte("edit\n"), 0o644))
	tb.waitState(t, "w1", "site", tb.repairedAfter(t, v, seen))

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(t.Context(), &rm))
	n, ok := pointOf(t, rm, "manifold.converge.drift_events", attribute.String("resource.type", "file"))
	require.True(t, ok)
	require.GreaterOrEqual(t, n, 1.0)
	n, ok = pointOf(t, rm, "manifold.converge.repair.duration")
	require.True(t, ok)
	require.Equal(t, 1.0, n, "one repaired resource timed from its event")
	n, ok = pointOf(t, rm, "manifold.converge.repairs", attribute.String("trigger", "drift"))
	require.True(t, ok)
	require.Equal(t, 1.0, n)
	n, ok = pointOf(t, rm, "manifold.converge.runs", attribute.String("trigger", "assign"), attribute.String("status", "succeeded"))
	require.True(t, ok)
	require.Equal(t, 1.0, n)
}

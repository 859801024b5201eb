package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// Tests of the cached plan (plan.go): interval checks run from it, and it
// is invalidated by a new version, a facts change and unassign, and
// bounded in size.

// checkedManifest: two files and a refresh-only exec subscribing to the
// first; the color fact is rendered into b.conf.
const checkedManifest = `
data: {root: "{{ lookup('facts.root') }}"}
resources:
  - {type: file, name: "{{ data.root }}/a.conf", content: "a managed\n"}
  - {type: file, name: "{{ data.root }}/b.conf", content: "{{ lookup('facts.color') }}\n"}
  - type: exec
    name: reload
    provider: shell
    command: "echo reloaded >> reloads.log"
    cwd: "{{ data.root }}"
    refreshonly: true
    subscribe: ["file#{{ data.root }}/a.conf"]
`

// assignManifest stores manifest as the assignment a of pool web, watch
// and interval as a says (interval: an hour unless set).
func (f *assignFixture) assignManifest(t *testing.T, a bus.Assignment, manifest string) uint64 {
	t.Helper()
	b := bundle.New()
	require.NoError(t, b.Add("manifest.yaml", []byte(manifest)))
	archive, err := b.Archive()
	require.NoError(t, err)
	a.Bundle, err = f.tb.bus.PutBundle(t.Context(), archive)
	require.NoError(t, err)
	if a.IntervalMS == 0 {
		a.IntervalMS = time.Hour.Milliseconds()
	}
	a.Entry, a.Pool, a.CreatedAt = "manifest.yaml", "web", time.Now().UTC()
	v, err := f.tb.bus.PutAssignment(t.Context(), a)
	require.NoError(t, err)
	return v
}

// startWorker starts a worker of pool web with cfg (Bus, Registry, Pools
// and Logger filled in); cleanup kills it.
func (f *assignFixture) startWorker(t *testing.T, cfg worker.Config) *worker.Worker {
	t.Helper()
	cfg.Bus, cfg.Registry, cfg.Pools = f.tb.bus, builtin.Registry(), []string{"web"}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	w, err := worker.New(cfg)
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() { within(t, "Kill", w.Kill) })
	return w
}

// runIDs lists the IDs of every run the coordinators recorded.
func runIDs(t *testing.T, b *bus.Bus) []string {
	t.Helper()
	runs, err := coordinator.ListRuns(t.Context(), b, 1000)
	require.NoError(t, err)
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.RunID
	}
	slices.Sort(ids)
	return ids
}

// storedPlan reads the plan cached on disk for an assignment (nil when
// there is none).
func storedPlan(t *testing.T, stateDir, name string) *struct {
	Version uint64            `json:"version"`
	Facts   string            `json:"facts"`
	Tasks   []json.RawMessage `json:"tasks"`
} {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stateDir, "plans", name+".json"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var p struct {
		Version uint64            `json:"version"`
		Facts   string            `json:"facts"`
		Tasks   []json.RawMessage `json:"tasks"`
	}
	require.NoError(t, json.Unmarshal(data, &p))
	return &p
}

// An interval pass over a cached plan that finds nothing drifted makes no
// run (the runs list stays as it was) and moves last_checked; a hand edit
// it finds (the assignment is not watched) gives one run, trigger
// interval, of the drifted file and its subscriber only.
func TestIntervalCheckFromCachedPlan(t *testing.T) {
	t.Parallel()
	f := setupAssign(t)
	root := t.TempDir()
	f.startWorker(t, worker.Config{Name: "w1", Facts: map[string]any{"root": root, "color": "blue"}})
	f.assignManifest(t, bus.Assignment{Name: "app", Watch: false, IntervalMS: 200}, checkedManifest)
	st := f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return m["app"].State == "converged" && m["app"].Cached && !m["app"].LastChecked.IsZero()
	})
	first := st["app"].LastRun
	before := runIDs(t, f.tb.bus)
	require.Contains(t, before, first)

	// Two clean passes: last_checked moves, no run.
	checked := st["app"].LastChecked
	for range 2 {
		st = f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
			return m["app"].LastChecked.After(checked)
		})
		require.Equal(t, "interval", st["app"].LastTrigger)
		require.Equal(t, first, st["app"].LastRun, "a clean interval pass made a run")
		checked = st["app"].LastChecked
	}
	require.Equal(t, before, runIDs(t, f.tb.bus), "a clean interval pass made a run")

	// A hand edit no watch sees: the next pass finds it and asks for a
	// run of a.conf and its subscriber, not of b.conf.
	a := filepath.Join(root, "a.conf")
	require.NoError(t, os.WriteFile(a, []byte("hand edit\n"), 0o644))
	st = f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return m["app"].LastRun != first && m["app"].State == "converged"
	})
	repair := st["app"].LastRun
	require.Equal(t, "interval", st["app"].LastTrigger)
	got, err := os.ReadFile(a)
	require.NoError(t, err)
	require.Equal(t, "a managed\n", string(got))
	rep, err := coordinator.GetReport(t.Context(), f.tb.bus, repair)
	require.NoError(t, err)
	require.Equal(t, "interval", rep.Trigger)
	status := map[string]string{}
	for _, r := range rep.Resources {
		status[r.Ref] = r.Status
	}
	require.Equal(t, map[string]string{"file#" + a: "changed", "exec#reload": "changed"}, status,
		"the repair run holds the drifted file and its subscriber only")
	// Once by the first run (a.conf created), once by the repair.
	require.Equal(t, []string{"reloaded", "reloaded"}, lines(t, filepath.Join(root, "reloads.log")))

	// Clean passes again: the runs list grew by the repair run only.
	checked = st["app"].LastChecked
	f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return m["app"].LastChecked.After(checked) && m["app"].LastRun == repair
	})
	require.Equal(t, slices.Sorted(slices.Values(append(before, repair))), runIDs(t, f.tb.bus))
}

// A new version of an assignment replaces the cached plan: the interval
// check compares with the new version's content, so the old content
// written back by hand is drift.
func TestPlanCacheInvalidatedByNewVersion(t *testing.T) {
	t.Parallel()
	f := setupAssign(t)
	root, state := t.TempDir(), t.TempDir()
	f.startWorker(t, worker.Config{Name: "w1", StateDir: state, Facts: map[string]any{"root": root}})
	manifest := func(content string) string {
		return fmt.Sprintf("data: {root: \"{{ lookup('facts.root') }}\"}\nresources:\n  - {type: file, name: \"{{ data.root }}/v.conf\", content: %q}\n", content)
	}
	f.assignManifest(t, bus.Assignment{Name: "app", IntervalMS: 200}, manifest("one\n"))
	f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return m["app"].Version == 1 && m["app"].State == "converged" && m["app"].Cached
	})
	require.Equal(t, uint64(1), storedPlan(t, state, "app").Version)

	v2 := f.assignManifest(t, bus.Assignment{Name: "app", IntervalMS: 200}, manifest("two\n"))
	st := f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return m["app"].Version == v2 && m["app"].State == "converged" && m["app"].Cached
	})
	require.Equal(t, v2, storedPlan(t, state, "app").Version)
	path := filepath.Join(root, "v.conf")
	require.NoError(t, os.WriteFile(path, []byte("one\n"), 0o644)) // version 1's content
	f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return m["app"].LastRun != st["app"].LastRun && m["app"].LastTrigger == "interval" && m["app"].State == "converged"
	})
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "two\n", string(got))
}

// A facts refresh that changes the facts' digest invalidates the cached
// plan: the next interval pass is a full run compiled with the new facts
// (published first), and the plan cached from it carries their digest.
func TestPlanCacheInvalidatedByFactsChange(t *testing.T) {
	t.Parallel()
	f := setupAssign(t)
	root, state := t.TempDir(), t.TempDir()
	var color atomic.Value
	color.Store("blue")
	facts := func(context.Context) (map[string]any, error) {
		return map[string]any{"root": root, "color": color.Load()}, nil
	}
	f.startWorker(t, worker.Config{Name: "w1", StateDir: state, Facts: map[string]any{"root": root, "color": "blue"},
		GatherFacts: facts, FactsInterval: 20 * time.Millisecond})
	f.assignManifest(t, bus.Assignment{Name: "app", Watch: true, IntervalMS: 300}, checkedManifest)
	st := f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return m["app"].State == "converged" && m["app"].Cached
	})
	b := filepath.Join(root, "b.conf")
	got, err := os.ReadFile(b)
	require.NoError(t, err)
	require.Equal(t, "blue\n", string(got))
	blue := storedPlan(t, state, "app").Facts

	// Nothing on the host drifted; only the facts changed. A plan kept
	// for the old facts would find b.conf stable forever.
	color.Store("red")
	st = f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return m["app"].LastRun != st["app"].LastRun && m["app"].LastTrigger == "interval" && m["app"].State == "converged" && m["app"].Cached
	})
	got, err = os.ReadFile(b)
	require.NoError(t, err)
	require.Equal(t, "red\n", string(got))
	rep, err := coordinator.GetReport(t.Context(), f.tb.bus, st["app"].LastRun)
	require.NoError(t, err)
	require.Len(t, rep.Resources, 3, "a full run after the facts changed")
	red := storedPlan(t, state, "app").Facts
	require.NotEqual(t, blue, red)
}

// Unassigning forgets the cached plan, on disk too.
func TestPlanCacheDroppedOnUnassign(t *testing.T) {
	t.Parallel()
	f := setupAssign(t)
	root, state := t.TempDir(), t.TempDir()
	f.startWorker(t, worker.Config{Name: "w1", StateDir: state, Facts: map[string]any{"root": root}})
	f.assign(t, bus.Assignment{Name: "motd", Watch: true})
	f.assign(t, bus.Assignment{Name: "other", Watch: true})
	f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return m["motd"].Cached && m["other"].Cached
	})
	require.NotNil(t, storedPlan(t, state, "motd"))
	require.NoError(t, f.tb.bus.DeleteAssignment(t.Context(), "motd"))
	f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		_, ok := m["motd"]
		return !ok
	})
	require.Nil(t, storedPlan(t, state, "motd"), "the unassigned plan is still on disk")
	require.NotNil(t, storedPlan(t, state, "other"), "another assignment's plan was removed")
}

// A plan of exactly PlanCacheMaxBytes is cached; one byte more is not,
// and the worker says why.
func TestPlanCacheBound(t *testing.T) {
	t.Parallel()
	f := setupAssign(t)
	parent := t.TempDir()
	// Roots of equal length: the three workers' plans have equal sizes.
	root := func(n int) string { return filepath.Join(parent, fmt.Sprintf("r%d", n)) }
	for n := 1; n <= 3; n++ {
		require.NoError(t, os.Mkdir(root(n), 0o755))
	}
	state := t.TempDir()
	f.startWorker(t, worker.Config{Name: "w1", StateDir: state, Facts: map[string]any{"root": root(1)}})
	f.assign(t, bus.Assignment{Name: "motd", Watch: true})
	f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool { return m["motd"].Cached })
	fi, err := os.Stat(filepath.Join(state, "plans", "motd.json"))
	require.NoError(t, err)
	size := int(fi.Size())

	f.startWorker(t, worker.Config{Name: "w2", PlanCacheMaxBytes: size, Facts: map[string]any{"root": root(2)}})
	logs := &capture{}
	w3state := t.TempDir()
	f.startWorker(t, worker.Config{Name: "w3", StateDir: w3state, PlanCacheMaxBytes: size - 1, Facts: map[string]any{"root": root(3)},
		Logger: slog.New(logs)})
	f.state(t, "w2", func(m map[string]worker.AssignmentStatus) bool {
		return m["motd"].State == "converged" && m["motd"].Cached
	})
	f.state(t, "w3", func(m map[string]worker.AssignmentStatus) bool {
		return m["motd"].State == "converged" && !m["motd"].Cached
	})
	require.FileExists(t, filepath.Join(root(3), "motd"))
	require.Nil(t, storedPlan(t, w3state, "motd"))
	msg := logs.find("plan not cached")
	require.Contains(t, msg, fmt.Sprintf("the plan is %d bytes, over the cache's bound of %d bytes", size, size-1))
}

// capture is a slog.Handler keeping every record as a line of text.
type capture struct {
	mu    sync.Mutex
	lines []string
	attrs []slog.Attr
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }

func (c *capture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	for _, a := range c.attrs {
		b.WriteString(" " + a.String())
	}
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	c.mu.Lock()
	c.lines = append(c.lines, b.String())
	c.mu.Unlock()
	return nil
}

func (c *capture) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &shared{c: c, attrs: attrs}
}

func (c *capture) WithGroup(string) slog.Handler { return c }

// shared is a capture with attributes, writing to its parent.
type shared struct {
	c     *capture
	attrs []slog.Attr
}

func (s *shared) Enabled(context.Context, slog.Level) bool { return true }
func (s *shared) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(s.attrs...)
	return s.c.Handle(ctx, r)
}
func (s *shared) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &shared{c: s.c, attrs: slices.Concat(s.attrs, attrs)}
}
func (s *shared) WithGroup(string) slog.Handler { return s }

// find returns the first line logged with msg in it ("" when none).
func (c *capture) find(msg string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		if strings.Contains(l, msg) {
			return l
		}
	}
	return ""
}

// With the server gone, a hand edit is repaired from the cached plan at
// once: the loop does not wait on writes of its state that cannot succeed
// (each would hold it for the request timeout, 5 s).
func TestOfflineRepairDoesNotWaitForTheBus(t *testing.T) {
	t.Parallel()
	f := setupAssign(t)
	root := t.TempDir()
	logs := &capture{}
	f.startWorker(t, worker.Config{Name: "w1", StateDir: t.TempDir(), Facts: map[string]any{"root": root}, Logger: slog.New(logs)})
	f.assign(t, bus.Assignment{Name: "motd", Watch: true})
	f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return m["motd"].State == "converged" && m["motd"].Cached
	})
	f.tb.srv.Shutdown()
	eventually(t, "the connection is down", func() bool { return !f.tb.bus.Conn().IsConnected() })

	motd := filepath.Join(root, "motd")
	edited := time.Now()
	require.NoError(t, os.WriteFile(motd, []byte("hand edit\n"), 0o644))
	eventually(t, "motd repaired offline", func() bool {
		got, _ := os.ReadFile(motd)
		return string(got) == "managed\n"
	})
	took := time.Since(edited)
	eventually(t, "the offline run's end logged", func() bool { return logs.find("offline convergence run ended") != "" })
	require.Empty(t, logs.find("convergence state not published"), "the loop tried to write its state with the connection down")
	require.Less(t, took, 4*time.Second, "the repair waited for the bus")
	t.Logf("hand edit repaired offline in %s", took)
}

// A drift hint is checked from the cached plan before a run is asked for:
// the event of a repair's own write (read after its run) finds the file
// stable and costs no run. Two hand edits, one after the other's repair,
// give exactly two repair runs, each holding its edited file changed
// (before, the first repair's own write was run again: a third run, or a
// stable file in the second).
func TestDriftHintCheckedFromCachedPlan(t *testing.T) {
	t.Parallel()
	f := setupAssign(t)
	root := t.TempDir()
	f.startWorker(t, worker.Config{Name: "w1", Facts: map[string]any{"root": root, "color": "blue"}})
	f.assignManifest(t, bus.Assignment{Name: "app", Watch: true}, checkedManifest)
	st := f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
		return m["app"].State == "converged" && m["app"].Cached
	})
	first := st["app"].LastRun
	before := runIDs(t, f.tb.bus)

	edit := func(path, after string) string {
		t.Helper()
		require.NoError(t, os.WriteFile(path, []byte("hand edit\n"), 0o644))
		st := f.state(t, "w1", func(m map[string]worker.AssignmentStatus) bool {
			return m["app"].LastRun != after && m["app"].State == "converged"
		})
		require.Equal(t, "drift", st["app"].LastTrigger)
		return st["app"].LastRun
	}
	a, b := filepath.Join(root, "a.conf"), filepath.Join(root, "b.conf")
	runA := edit(a, first)
	runB := edit(b, runA)
	for run, file := range map[string]string{runA: a, runB: b} {
		rep, err := coordinator.GetReport(t.Context(), f.tb.bus, run)
		require.NoError(t, err)
		for _, r := range rep.Resources {
			if strings.HasPrefix(r.Ref, "file#") {
				require.Equal(t, "file#"+file, r.Ref, "run %s holds a file not edited before it", run)
				require.Equal(t, "changed", r.Status)
			}
		}
	}
	got, err := os.ReadFile(b)
	require.NoError(t, err)
	require.Equal(t, "blue\n", string(got))
	require.Equal(t, slices.Sorted(slices.Values(append(before, runA, runB))), runIDs(t, f.tb.bus),
		"the repairs' own writes were run again")
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/worker"
)

// assign, assignments, workers and unassign against a real server, a
// coordinator and a worker of pool web.
func TestAssignCommands(t *testing.T) {
	t.Parallel()
	srv, b := bustest.Start(t, bus.Config{})
	c, err := coordinator.New(coordinator.Config{Bus: b, Name: "c1"})
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(c.Stop)
	root := t.TempDir()
	w, err := worker.New(worker.Config{Bus: b, Registry: workerRegistry(b), Name: "w1", Pools: []string{"web"},
		Facts: map[string]any{"root": root}, DebtDir: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(w.Kill)
	// An assignment stored before the worker read the stored ones runs
	// with trigger start: the one below must come after.
	select {
	case <-w.AssignmentsSynced():
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not read the stored assignments within 20s")
	}

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"site.yaml": `
data: {root: "{{ lookup('facts.root') }}"}
resources:
  - {type: file, name: "{{ data.root }}/motd", content: "hello\n"}
`})
	manifest := filepath.Join(dir, "site.yaml")
	url := srv.ClientURL()

	r := run(t, "assign", "--server", url, "--pool", "web", "--fact", "root=/x", "--interval", "1h", "site", manifest)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "assignment site version ")

	r = run(t, "assignments", "--server", url, "--output", "json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var list assignmentsReply
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list.Assignments, 1)
	a := list.Assignments[0]
	require.Equal(t, "site", a.Name)
	require.Equal(t, "web", a.Pool)
	require.True(t, a.Watch)
	require.NotZero(t, a.Version)
	require.Equal(t, time.Hour.Milliseconds(), a.IntervalMS)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err = b.Workers().WaitFor(ctx, "w1", func(data []byte) bool {
		var reg worker.Registration
		return json.Unmarshal(data, &reg) == nil && reg.Assignments["site"].State == "converged"
	})
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(root, "motd"))
	require.NoError(t, err)
	require.Equal(t, "hello\n", string(got))

	r = run(t, "workers", "--server", url)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "ASSIGNMENTS")
	require.Contains(t, r.stdout, "site@")
	require.Contains(t, r.stdout, ":converged")
	r = run(t, "workers", "--server", url, "--output", "json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var workers workersReply
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &workers))
	require.Len(t, workers.Workers, 1)
	st := workers.Workers[0].Assignments["site"]
	require.Equal(t, a.Version, st.Version)
	require.NotEmpty(t, st.LastRun)
	require.Equal(t, "assign", st.LastTrigger)

	// Convergence runs are ordinary runs: runs and status show them.
	r = run(t, "runs", "--server", url)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "TRIGGER")
	require.Contains(t, r.stdout, "assign (site)")
	r = run(t, "status", "--server", url, st.LastRun)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("trigger assign, assignment site version %d", a.Version))

	r = run(t, "unassign", "--server", url, "site")
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = run(t, "unassign", "--server", url, "site")
	require.Equal(t, ExitInvalid, r.code)
	require.Contains(t, r.stderr, "no assignment site")
	r = run(t, "assign", "--server", url, "--pool", "bad.pool", "x", manifest)
	require.Equal(t, ExitInvalid, r.code)
	require.Contains(t, r.stderr, "--pool")
}

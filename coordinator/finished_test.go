package coordinator_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// TestFinishedHandsOverTheStoredReport: Config.Finished is given each
// finished run's report before its run_finished event (before it is
// stored, even), and its bytes are
// those GetReport's report encodes to (what `manifold apply --output json`
// prints from them): changed, stable, failed, skipped and noop resources,
// diffs, messages with quotes and non-ASCII text, a post_message.
func TestFinishedHandsOverTheStoredReport(t *testing.T) {
	t.Parallel()
	type handed struct {
		rep  *coordinator.Report
		data []byte
	}
	var (
		mu   sync.Mutex
		seen = map[string]handed{}
	)
	tb := setup(t, setupOpts{coord: coordinator.Config{Finished: func(runID string, rep *coordinator.Report, data []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		seen[runID] = handed{rep, data}
		return false
	}}})
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(join(dir, "old"), []byte("before\n"), 0o644))
	manifest := fmt.Sprintf(`
post_message: "done: «ok» \"quoted\""
resources:
  - {type: file, name: %[2]q, content: "x\n", alias: conf}
  - {type: file, name: %[3]q, content: "after\n"}
  - {type: exec, name: "guarded ✓", provider: shell, command: "touch nope", creates: %[3]q, cwd: %[1]q}
  - {type: exec, name: broken, provider: shell, command: "echo 'oops «»' >&2; exit 4", cwd: %[1]q}
  - {type: exec, name: dependent, provider: shell, command: "true", cwd: %[1]q, require: [exec#broken]}
`, dir, join(dir, "conf"), join(dir, "old"))
	for i, mod := range [][]func(*bus.RunRequest){{noop}, nil, nil} {
		runID := tb.submit(t, manifest, mod...)
		_, events := tb.wait(t, runID)
		require.Equal(t, bus.EventRunFinished, events[len(events)-1].Kind)
		mu.Lock()
		h, ok := seen[runID]
		mu.Unlock()
		require.True(t, ok, "no report handed over before run_finished")
		got, err := coordinator.GetReport(t.Context(), tb.bus, runID)
		require.NoError(t, err)
		want, err := coordinator.MarshalReport(got)
		require.NoError(t, err)
		require.Equal(t, string(want), string(h.data))
		again, err := coordinator.MarshalReport(h.rep)
		require.NoError(t, err)
		require.Equal(t, string(want), string(again))
		if i == 0 {
			require.Equal(t, coordinator.RunSucceeded, h.rep.Status, "a noop run runs nothing that fails")
			require.NotEmpty(t, h.rep.PostMessage)
		} else {
			require.Equal(t, coordinator.RunFailed, h.rep.Status)
		}
	}
	mu.Lock()
	require.Len(t, seen, 3)
	mu.Unlock()
}

// TestFinishedKeptIsNotStored: a report Config.Finished keeps (its only
// reader has it) is not stored, and the run ends as any other: its
// header says how (GetReport gives that header), its run_finished event
// follows; a report not kept is stored.
func TestFinishedKeptIsNotStored(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		keep   = map[string]bool{}
		handed = map[string][]byte{}
	)
	tb := setup(t, setupOpts{coord: coordinator.Config{Finished: func(runID string, rep *coordinator.Report, data []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		handed[runID] = data
		return keep[runID]
	}}})
	dir := t.TempDir()
	manifest := fmt.Sprintf("resources:\n  - {type: file, name: %q, content: \"x\\n\"}\n", join(dir, "f"))
	for _, kept := range []bool{true, false} {
		runID := coordinator.NewRunID()
		mu.Lock()
		keep[runID] = kept
		mu.Unlock()
		tb.submit(t, manifest, func(r *bus.RunRequest) { r.RunID = runID })
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		var last bus.Event
		require.NoError(t, tb.bus.FollowEvents(ctx, runID, func(ev bus.Event) bool {
			last = ev
			return ev.Kind != bus.EventRunFinished
		}))
		cancel()
		require.Equal(t, string(coordinator.RunSucceeded), last.Status)
		mu.Lock()
		data := handed[runID]
		mu.Unlock()
		require.NotEmpty(t, data, "handed over")
		got, err := coordinator.GetReport(t.Context(), tb.bus, runID)
		require.NoError(t, err)
		require.Equal(t, coordinator.RunSucceeded, got.Status)
		if kept {
			_, err := tb.bus.GetReport(t.Context(), runID)
			require.ErrorIs(t, err, bus.ErrNotFound, "a kept report is not stored")
			require.Empty(t, got.Resources, "the header only")
		} else {
			want, err := coordinator.MarshalReport(got)
			require.NoError(t, err)
			require.Equal(t, string(want), string(data))
		}
	}
}

package coordinator_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

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
	tb := setup(t, setupOpts{coord: coordinator.Config{Finished: func(runID string, rep *coordinator.Report, data []byte) {
		mu.Lock()
		defer mu.Unlock()
		seen[runID] = handed{rep, data}
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

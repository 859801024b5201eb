package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
)

// TestAPISubmitCompilesOnce: a root run submitted through the API starts
// from the plan its submission was checked with: its manifest is compiled
// once, not again when the run starts; the run does what it says. A run
// submitted fire-and-forget (no check at submission) is compiled when it
// starts, once. Not parallel: it counts every compile of the package.
func TestAPISubmitCompilesOnce(t *testing.T) {
	e := startTreeEngine(t, Config{}, 1)
	var (
		mu    sync.Mutex
		count = map[string]int{}
	)
	hook := func(path string) {
		mu.Lock()
		defer mu.Unlock()
		count[path]++
	}
	prepareHook.Store(&hook)
	t.Cleanup(func() { prepareHook.Store(nil) })

	dir := t.TempDir()
	for i, via := range []string{"api", "intake"} {
		name := fmt.Sprintf("compile-once-%s.yaml", via)
		target := filepath.Join(dir, via)
		rr := bus.RunRequest{RunID: NewRunID(), ManifestName: name,
			ManifestYAML: fmt.Sprintf("resources:\n  - file:\n      - %s:\n          content: \"run %d\\n\"\n", target, i)}
		if via == "api" {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			followed := make(chan error, 1)
			go func() {
				followed <- e.bus.FollowEvents(ctx, rr.RunID, func(ev bus.Event) bool {
					return ev.Kind != bus.EventRunFinished || ev.RunID != rr.RunID
				})
			}()
			data, err := json.Marshal(rr)
			require.NoError(t, err)
			msg, err := e.bus.Conn().Request(bus.SubjectAPIRunsSubmit, data, 10*time.Second)
			require.NoError(t, err)
			require.Contains(t, string(msg.Data), rr.RunID)
			require.NoError(t, <-followed)
			rep, err := GetReport(ctx, e.bus, rr.RunID)
			cancel()
			require.NoError(t, err)
			require.Equal(t, RunSucceeded, rep.Status, "%+v", rep)
		} else {
			rep, _ := e.run(t, rr)
			require.Equal(t, RunSucceeded, rep.Status, "%+v", rep)
		}
		got, err := os.ReadFile(target)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("run %d\n", i), string(got))
		mu.Lock()
		n := count[name]
		mu.Unlock()
		require.Equal(t, 1, n, "compiles of the run submitted by %s", via)
	}
}

package coordinator_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// TestCancelStopsTheRunAtOnce cancels through the API while a task runs:
// the run ends cancelled, the running command is killed, nothing after it
// is dispatched, and the coordinator lets go of the run at once (its mark
// of an unfinished run is gone) rather than at its next outcome.
func TestCancelStopsTheRunAtOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	dir := t.TempDir()
	runID := tb.submit(t, fmt.Sprintf(`
resources:
  - {type: exec, name: long, provider: shell, command: "touch started; sleep 30; touch finished", cwd: %[1]q}
  - {type: exec, name: after, provider: shell, command: "touch after", cwd: %[1]q}
`, dir))
	waitForEvent(t, tb.bus, runID, func(ev bus.Event) bool { return ev.Kind == bus.EventTaskDispatched })
	require.Eventually(t, func() bool { return exists(join(dir, "started")) }, runDeadline, 10*time.Millisecond)

	req, _ := json.Marshal(bus.CancelRunRequest{RunID: runID})
	msg, err := tb.bus.Conn().Request(bus.SubjectAPIRunsCancel, req, 5*time.Second)
	require.NoError(t, err)
	require.NotContains(t, string(msg.Data), `"error"`)

	rep, _ := tb.wait(t, runID)
	require.Equal(t, coordinator.RunCancelled, rep.Status)
	require.Equal(t, "cancelled", resource(t, rep, "exec#long").Status)
	require.Equal(t, "cancelled", resource(t, rep, "exec#after").Status)
	require.Eventually(t, func() bool {
		keys, err := tb.bus.Runs().KeysMatching(t.Context(), "active.*")
		return err == nil && len(keys) == 0
	}, 2*time.Second, 10*time.Millisecond, "the coordinator still holds the cancelled run (without the wake it would notice only at its next lease renewal, 3.3s)")
	require.False(t, exists(join(dir, "finished")), "the running command was killed")
	require.False(t, exists(join(dir, "after")))
}

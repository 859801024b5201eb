package coordinator_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// liveWorker starts a worker that only registers (no assignments taken):
// the coordinator's checks read its entry.
func (tb *testBundle) liveWorker(t *testing.T, name string, pools ...string) {
	t.Helper()
	w, err := worker.New(worker.Config{Bus: tb.bus, Registry: builtin.Registry(), Name: name, Pools: pools,
		Logger: testLogger(t), DisableAssignments: true})
	require.NoError(t, err)
	require.NoError(t, w.Start(t.Context()))
	t.Cleanup(func() { within(t, "worker Kill", w.Kill) })
}

// report sends an offline run as worker name would, and returns the reply
// (its error, if any).
func (tb *testBundle) reportOffline(t *testing.T, name, assignment string, run *bus.OfflineRun) bus.ConvergeReply {
	t.Helper()
	data, err := json.Marshal(bus.ConvergeRequest{V: bus.Version, Assignment: assignment, Trigger: bus.TriggerOffline, Offline: run})
	require.NoError(t, err)
	msg, err := tb.bus.Conn().Request(bus.ConvergeSubject(name), data, 10*time.Second)
	require.NoError(t, err)
	var rep bus.ConvergeReply
	require.NoError(t, json.Unmarshal(msg.Data, &rep))
	return rep
}

// offlineRun is a run of version v that changed n files, ended a second
// ago; its ID is unique to the test and seq.
func offlineRun(t *testing.T, seq int, v uint64, n int) *bus.OfflineRun {
	end := time.Now().UTC().Add(-time.Second)
	r := &bus.OfflineRun{RunID: fmt.Sprintf("%s-off-%010x", end.Format("20060102T150405000Z"), seq), Trigger: "drift",
		AssignmentVersion: v, Manifest: "site.yaml", StartedAt: end.Add(-time.Second), FinishedAt: end, Total: n + 1, Stable: 1,
		Why: "bus unreachable: no coordinator answers"}
	for i := range n {
		r.Outcomes = append(r.Outcomes, bus.OfflineOutcome{Ref: fmt.Sprintf("file#/srv/%d", i), Status: bus.TaskChanged,
			Changed: true, Message: "updated content", DurationMS: 3})
	}
	return r
}

// A reported offline run is recorded once as an ordinary finished run,
// marked offline and reported by its worker, with its trigger; what the
// coordinator can check is checked, and the bounds hold at their limit.
func TestOfflineRunRecordedAndChecked(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	tb.liveWorker(t, "w1", "web")
	tb.liveWorker(t, "w2", "web")
	tb.liveWorker(t, "db1", "db")
	v := tb.assign(t, "site", assignManifest("v1\n"))

	run := offlineRun(t, 1, v, 1)
	rep := tb.reportOffline(t, "w1", "site", run)
	require.Nil(t, rep.ErrorReply.Error)
	require.Equal(t, bus.ConvergeReply{RunID: run.RunID, Ended: true, Status: "succeeded", Total: 2}, rep)
	report, err := coordinator.GetReport(t.Context(), tb.bus, run.RunID)
	require.NoError(t, err)
	require.Equal(t, "drift", report.Trigger)
	require.Equal(t, "site", report.Assignment)
	require.Equal(t, v, report.AssignmentVersion)
	require.Equal(t, 1, report.Counts.Changed)
	require.Equal(t, 1, report.Counts.Stable)
	require.Equal(t, []string{"file#/srv/0"}, refsOf(report))
	require.Equal(t, "w1", report.Resources[0].Worker)

	// Twice: recorded once, the same answer.
	require.Equal(t, rep, tb.reportOffline(t, "w1", "site", run))
	runs, err := coordinator.ListRuns(t.Context(), tb.bus, 100)
	require.NoError(t, err)
	n := 0
	for _, r := range runs {
		if r.RunID == run.RunID {
			n++
			require.True(t, r.Offline)
			require.Equal(t, "drift", r.Trigger)
		}
	}
	require.Equal(t, 1, n)

	existing := map[string]bool{run.RunID: true} // runs recorded before
	refused := func(code bus.APIErrorCode, contains, worker, assignment string, r *bus.OfflineRun) {
		t.Helper()
		e := tb.reportOffline(t, worker, assignment, r).ErrorReply.Error
		require.NotNil(t, e, "accepted: %s", contains)
		require.Equal(t, code, e.Code, e.Message)
		require.Contains(t, e.Message, contains)
		_, err := coordinator.GetReport(t.Context(), tb.bus, r.RunID)
		if !existing[r.RunID] {
			require.Error(t, err, "a refused run was recorded")
		}
	}
	// Another worker cannot claim w1's run; nor a worker of another pool.
	refused(bus.APIConflict, "is not an offline run of this worker", "w2", "site", run)
	refused(bus.APIInvalid, "not in pool web", "db1", "site", offlineRun(t, 2, v, 1))
	// A version the assignment never had, an assignment not stored.
	refused(bus.APIInvalid, fmt.Sprintf("has no version %d", v+1), "w1", "site", offlineRun(t, 3, v+1, 1))
	refused(bus.APINotFound, "no assignment nope", "w1", "nope", offlineRun(t, 4, v, 1))
	// Too old, too far ahead.
	old := offlineRun(t, 5, v, 1)
	old.StartedAt, old.FinishedAt = old.StartedAt.Add(-31*24*time.Hour), old.FinishedAt.Add(-31*24*time.Hour)
	refused(bus.APIInvalid, "more than 720h0m0s ago", "w1", "site", old)
	ahead := offlineRun(t, 6, v, 1)
	ahead.StartedAt, ahead.FinishedAt = ahead.StartedAt.Add(2*time.Hour), ahead.FinishedAt.Add(2*time.Hour)
	refused(bus.APIInvalid, "ahead", "w1", "site", ahead)
	// A run ID naming an ordinary run.
	other := tb.submit(t, "resources: []\n")
	tb.wait(t, other)
	existing[other] = true
	named := offlineRun(t, 7, v, 1)
	named.RunID = other
	refused(bus.APIConflict, "is not an offline run of this worker", "w1", "site", named)
	// No run at all.
	e := tb.reportOffline(t, "w1", "site", nil).ErrorReply.Error
	require.NotNil(t, e)
	require.Contains(t, e.Message, "trigger offline needs an offline run")

	// Bounds: MaxOfflineOutcomes outcomes and MaxOfflineText bytes of
	// message are accepted; one more of either is refused.
	full := offlineRun(t, 8, v, bus.MaxOfflineOutcomes)
	full.Outcomes[0].Message = strings.Repeat("m", bus.MaxOfflineText)
	full.Outcomes[1].Status, full.Outcomes[1].Changed, full.Outcomes[1].Error = bus.TaskFailed, false, strings.Repeat("e", bus.MaxOfflineText)
	require.Nil(t, tb.reportOffline(t, "w1", "site", full).ErrorReply.Error)
	report, err = coordinator.GetReport(t.Context(), tb.bus, full.RunID)
	require.NoError(t, err)
	require.Len(t, report.Resources, bus.MaxOfflineOutcomes)
	require.Equal(t, coordinator.RunFailed, report.Status, "a failed outcome fails the run")
	require.Contains(t, report.Error, "1 resources failed (offline run reported by worker w1)")

	over := offlineRun(t, 9, v, bus.MaxOfflineOutcomes+1)
	refused(bus.APIInvalid, fmt.Sprintf("%d outcomes, at most %d", bus.MaxOfflineOutcomes+1, bus.MaxOfflineOutcomes), "w1", "site", over)
	long := offlineRun(t, 10, v, 1)
	long.Outcomes[0].Message = strings.Repeat("m", bus.MaxOfflineText+1)
	refused(bus.APIInvalid, fmt.Sprintf("message or error over %d bytes", bus.MaxOfflineText), "w1", "site", long)
}

package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/internal/bustest"
)

// recursiveManifest is the 175-byte kind of manifest whose recursive Jet
// block overflowed the stack of the coordinator compiling it (a fatal
// error: the process died, exit 2).
func recursiveManifest(dir string) string {
	return fmt.Sprintf(`resources:
  - file:
      - %s:
          content: "{{ jet('[[ block r() ]][[ yield r() ]][[ end ]]') }}"
`, join(dir, "never"))
}

// The recursive template sent to manifests.validate is an invalid
// manifest, answered as such, and the coordinator keeps serving.
func TestRecursiveTemplateOnTheValidateAPI(t *testing.T) {
	tb := setup(t, setupOpts{noWorker: true})
	validate := func(manifest string) bus.ValidateReply {
		t.Helper()
		body, err := json.Marshal(bus.ValidateRequest{ManifestYAML: manifest, ManifestName: "m.yaml"})
		require.NoError(t, err)
		msg, err := tb.bus.Conn().Request(bus.SubjectAPIManifestsValidate, body, runDeadline)
		require.NoError(t, err)
		var reply bus.ValidateReply
		require.NoError(t, json.Unmarshal(msg.Data, &reply))
		require.Nil(t, reply.Error, "%s", msg.Data)
		return reply
	}
	dir := t.TempDir()
	start := time.Now()
	reply := validate(recursiveManifest(dir))
	require.False(t, reply.Valid)
	require.Len(t, reply.Errors, 1, "%v", reply.Errors)
	require.Contains(t, reply.Errors[0], "m.yaml:3:")
	require.Contains(t, reply.Errors[0], "evaluation limit exceeded")
	require.Contains(t, reply.Errors[0], "nested more than 1000 deep")
	require.Less(t, time.Since(start), 10*time.Second)

	// Still serving: the next request is answered, and runs run.
	require.True(t, validate("resources: []\n").Valid)
	rep := tb.run(t, "resources: []\n")
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
	require.False(t, exists(join(dir, "never")))
}

// The recursive template queued as a run on the submit stream (before any
// coordinator started) killed every coordinator that started later, each
// resuming it. Now the first coordinator fails the run, saying why; a
// coordinator started afterwards leaves it failed; and one that does find
// it unfinished (its owner died while compiling it) fails it too and goes
// on serving.
func TestRecursiveTemplateRunIsAFailedRunNotAPoisonPill(t *testing.T) {
	srv, b := bustest.Start(t, bus.Config{})
	tb := &testBundle{srv: srv, bus: b}
	dir := t.TempDir()
	runID := tb.submit(t, recursiveManifest(dir))

	a, _ := startCoordinator(t, srv, "coord-a", 500*time.Millisecond)
	rep, events := tb.wait(t, runID)
	require.Equal(t, coordinator.RunFailed, rep.Status, "%+v", rep)
	require.Contains(t, rep.Error, "m.yaml:3:")
	require.Contains(t, rep.Error, "nested more than 1000 deep")
	require.Empty(t, rep.Resources)
	for _, ev := range events {
		require.NotEqual(t, bus.EventTaskDispatched, ev.Kind)
	}
	noActiveMark(t, b, runID)
	a.Stop()

	// A coordinator started afterwards serves, and leaves the run failed.
	startCoordinator(t, srv, "coord-b", 500*time.Millisecond)
	rep2 := tb.run(t, "resources: []\n")
	require.Equal(t, coordinator.RunSucceeded, rep2.Status, "%+v", rep2)
	again, err := coordinator.GetReport(t.Context(), b, runID)
	require.NoError(t, err)
	require.Equal(t, coordinator.RunFailed, again.Status)
	require.Equal(t, rep.Error, again.Error)

	// The state an owner dying while compiling leaves: the run queued,
	// marked active, its lease lapsed. The coordinator resumes it, fails
	// it with the compile's error and serves on.
	e, err := b.Runs().Get(t.Context(), "run."+runID)
	require.NoError(t, err)
	var rec map[string]any
	require.NoError(t, json.Unmarshal(e.Value, &rec))
	rec["status"], rec["error"], rec["owner"] = "queued", "", "coord-dead"
	rec["lease_until"] = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	_, err = b.Runs().Put(t.Context(), "run."+runID, data)
	require.NoError(t, err)
	_, err = b.Runs().Put(t.Context(), "active."+runID, nil)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), runDeadline)
	defer cancel()
	failed, err := b.Runs().WaitFor(ctx, "run."+runID, func(v []byte) bool {
		var r struct {
			Status coordinator.RunStatus `json:"status"`
		}
		return json.Unmarshal(v, &r) == nil && r.Status == coordinator.RunFailed
	})
	require.NoError(t, err, "the resumed run did not end failed")
	require.Contains(t, string(failed), "nested more than 1000 deep")
	noActiveMark(t, b, runID)
	rep3 := tb.run(t, "resources: []\n")
	require.Equal(t, coordinator.RunSucceeded, rep3.Status, "%+v", rep3)
	require.False(t, exists(join(dir, "never")))
}

// A recursive resources_jet_file, read from the run's bundle, is the
// manifest's error on the runs.submit API, and a failed run when queued
// on the submit stream; the coordinator serves on.
func TestRecursiveResourcesJetFile(t *testing.T) {
	tb := setup(t, setupOpts{noWorker: true})
	b := bundle.New()
	require.NoError(t, b.Add("manifest.yaml", []byte("resources_jet_file: r.jet\n")))
	require.NoError(t, b.Add("r.jet", []byte("[[ block r() ]][[ yield r() ]][[ end ]]")))
	archive, err := b.Archive()
	require.NoError(t, err)
	ref, err := tb.bus.PutBundle(t.Context(), archive)
	require.NoError(t, err)

	body, err := json.Marshal(bus.RunRequest{RunID: coordinator.NewRunID(), Bundle: ref})
	require.NoError(t, err)
	msg, err := tb.bus.Conn().Request(bus.SubjectAPIRunsSubmit, body, runDeadline)
	require.NoError(t, err)
	var reply bus.SubmitReply
	require.NoError(t, json.Unmarshal(msg.Data, &reply))
	require.NotNil(t, reply.Error, "%s", msg.Data)
	require.Equal(t, bus.APIInvalid, reply.Error.Code)
	require.Contains(t, reply.Error.Message, "manifest.yaml: resources_jet_file: /r.jet:1: template: evaluation limit exceeded")
	require.Contains(t, reply.Error.Message, "nested more than 1000 deep")

	rep, _ := tb.wait(t, tb.submit(t, "", func(r *bus.RunRequest) { r.Bundle, r.ManifestName = ref, "" }))
	require.Equal(t, coordinator.RunFailed, rep.Status, "%+v", rep)
	require.Contains(t, rep.Error, "resources_jet_file: /r.jet:1: template: evaluation limit exceeded")
	require.Contains(t, rep.Error, "nested more than 1000 deep")
	require.Empty(t, rep.Resources)

	rep = tb.run(t, "resources: []\n")
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
}

// noActiveMark waits until runID is no longer marked active (unfinished):
// the mark's last entry is its deletion.
func noActiveMark(t *testing.T, b *bus.Bus, runID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), runDeadline)
	defer cancel()
	_, err := b.Runs().WaitFor(ctx, "active."+runID, func([]byte) bool { return false })
	require.ErrorIs(t, err, bus.ErrNotFound, "run %s still marked active", runID)
}

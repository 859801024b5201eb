package coordinator_test

import (
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// The tests below run manifests through a real coordinator and a real worker
// (builtin registry) over an embedded JetStream, with real files and
// /bin/sh commands in a temporary directory.

func TestRequireSkipsDependentsTransitively(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	dir := t.TempDir()
	rep := tb.run(t, fmt.Sprintf(`
resources:
  - {type: exec, name: broken, provider: shell, command: "exit 3", cwd: %[1]q}
  - {type: exec, name: b, provider: shell, command: "touch b", cwd: %[1]q, require: [exec#broken]}
  - {type: exec, name: c, provider: shell, command: "touch c", cwd: %[1]q, require: [exec#b]}
  - {type: file, name: %[2]q, content: "unrelated\n"}
`, dir, join(dir, "d")))

	require.Equal(t, coordinator.RunFailed, rep.Status)
	require.Equal(t, coordinator.Counts{Total: 4, Changed: 1, Failed: 1, Skipped: 2}, rep.Counts)
	require.Equal(t, "failed", resource(t, rep, "exec#broken").Status)
	require.Contains(t, resource(t, rep, "exec#broken").Error, "exit")
	b := resource(t, rep, "exec#b")
	require.Equal(t, "skipped", b.Status)
	require.Equal(t, "skipped: exec#broken failed", b.Message)
	c := resource(t, rep, "exec#c")
	require.Equal(t, "skipped", c.Status)
	require.Equal(t, "skipped: exec#b was skipped", c.Message)
	require.Equal(t, "changed", resource(t, rep, "file#"+join(dir, "d")).Status)
	require.False(t, exists(join(dir, "b")), "a dependent of a failed resource ran")
	require.False(t, exists(join(dir, "c")), "a transitive dependent of a failed resource ran")
	require.True(t, exists(join(dir, "d")), "an unrelated resource did not run")
}

func TestSubscribeRefreshesOnlyWhenTheTargetChanged(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	dir := t.TempDir()
	conf := join(dir, "app.conf")
	manifest := func(content string) string {
		return fmt.Sprintf(`
resources:
  - {type: file, name: %[1]q, content: %[3]q}
  - type: exec
    name: reload
    provider: shell
    command: "echo reloaded >> reloads.log"
    cwd: %[2]q
    refreshonly: true
    subscribe: ["file#%[1]s"]
  - type: exec
    name: unrelated-refreshonly
    provider: shell
    command: "touch never"
    cwd: %[2]q
    refreshonly: true
`, conf, dir, content)
	}

	rep := tb.run(t, manifest("v1\n"))
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep)
	reload := resource(t, rep, "exec#reload")
	require.Equal(t, "changed", reload.Status)
	require.True(t, reload.Refreshed)
	require.Equal(t, "stable", resource(t, rep, "exec#unrelated-refreshonly").Status)
	require.Equal(t, 1, lines(t, join(dir, "reloads.log")))

	rep = tb.run(t, manifest("v1\n"))
	require.Equal(t, "stable", resource(t, rep, "file#"+conf).Status)
	reload = resource(t, rep, "exec#reload")
	require.Equal(t, "stable", reload.Status, "refreshed although its target did not change")
	require.False(t, reload.Refreshed)
	require.Equal(t, 1, lines(t, join(dir, "reloads.log")))

	rep = tb.run(t, manifest("v2\n"))
	require.Equal(t, "changed", resource(t, rep, "exec#reload").Status)
	require.Equal(t, 2, lines(t, join(dir, "reloads.log")))
	require.False(t, exists(join(dir, "never")))
}

func TestNoopReportsRefreshAsWouldChangeAndExecutesNothing(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	dir := t.TempDir()
	conf := join(dir, "app.conf")
	rep := tb.run(t, fmt.Sprintf(`
resources:
  - {type: file, name: %[1]q, content: "v1\n"}
  - type: exec
    name: reload
    provider: shell
    command: "touch reloaded"
    cwd: %[2]q
    refreshonly: true
    subscribe: ["file#%[1]s"]
`, conf, dir), noop)

	require.Equal(t, coordinator.RunSucceeded, rep.Status)
	require.True(t, rep.Noop)
	require.Equal(t, coordinator.Counts{Total: 2, Changed: 2}, rep.Counts)
	file := resource(t, rep, "file#"+conf)
	require.Equal(t, "changed", file.Status)
	require.True(t, file.Noop)
	require.Contains(t, file.Message, "would")
	reload := resource(t, rep, "exec#reload")
	require.Equal(t, "changed", reload.Status)
	require.True(t, reload.Noop)
	require.True(t, reload.Refreshed)
	require.Contains(t, reload.Message, "would")
	require.False(t, exists(conf), "noop wrote the file")
	require.False(t, exists(join(dir, "reloaded")), "noop ran the refreshed command")
}

func TestFailOnErrorStopsDispatching(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	dir := t.TempDir()
	rep := tb.run(t, fmt.Sprintf(`
ccm:
  fail_on_error: true
  resources:
    - {type: exec, name: first, provider: shell, command: "touch first", cwd: %[1]q}
    - {type: exec, name: broken, provider: shell, command: "exit 1", cwd: %[1]q}
    - {type: exec, name: after, provider: shell, command: "touch after", cwd: %[1]q}
    - {type: file, name: %[2]q, content: x}
`, dir, join(dir, "file")))

	require.Equal(t, coordinator.RunFailed, rep.Status)
	require.Equal(t, coordinator.Counts{Total: 4, Changed: 1, Failed: 1, Skipped: 2}, rep.Counts)
	for _, ref := range []string{"exec#after", "file#" + join(dir, "file")} {
		r := resource(t, rep, ref)
		require.Equal(t, "skipped", r.Status, ref)
		require.Contains(t, r.Message, "fail_on_error", ref)
	}
	require.True(t, exists(join(dir, "first")))
	require.False(t, exists(join(dir, "after")))
	require.False(t, exists(join(dir, "file")))
}

// TestGraphRunsIndependentResourcesConcurrently proves parallelism without
// timing: each command waits (boundedly) for the other's marker, so both
// succeed only when they run at the same time.
func TestGraphRunsIndependentResourcesConcurrently(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{concurrency: 2})
	dir := t.TempDir()
	wait := func(mine, other string) string {
		return fmt.Sprintf("touch %s; for i in $(seq 200); do [ -e %s ] && exit 0; sleep 0.05; done; exit 1", mine, other)
	}
	rep := tb.run(t, fmt.Sprintf(`
ordering: graph
resources:
  - {type: exec, name: after-both, provider: shell, command: "touch done", cwd: %[1]q, require: [exec#a, exec#b]}
  - {type: exec, name: a, provider: shell, command: %[2]q, cwd: %[1]q}
  - {type: exec, name: b, provider: shell, command: %[3]q, cwd: %[1]q}
`, dir, wait("a", "b"), wait("b", "a")))

	require.Equal(t, coordinator.RunSucceeded, rep.Status, "%+v", rep.Resources)
	require.Equal(t, coordinator.Counts{Total: 3, Changed: 3}, rep.Counts)
	require.True(t, exists(join(dir, "done")))
	// The report keeps declaration order, whatever order things ran in.
	require.Equal(t, []string{"exec#after-both", "exec#a", "exec#b"}, refs(rep))
}

func refs(rep *coordinator.Report) []string {
	out := make([]string, len(rep.Resources))
	for i, r := range rep.Resources {
		out[i] = r.Ref
	}
	return out
}

var traceID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestReport(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(join(dir, "exists"), nil, 0o644))
	start := time.Now()
	rep := tb.run(t, fmt.Sprintf(`
resources:
  - {type: file, name: %[2]q, content: "x\n", alias: conf}
  - {type: exec, name: slow, provider: shell, command: "sleep 0.1", cwd: %[1]q}
  - {type: exec, name: guarded, provider: shell, command: "touch nope", creates: exists, cwd: %[1]q}
  - {type: exec, name: broken, provider: shell, command: "echo oops >&2; exit 4", cwd: %[1]q}
  - {type: exec, name: dependent, provider: shell, command: "true", cwd: %[1]q, require: [exec#broken]}
`, dir, join(dir, "conf")))
	elapsed := time.Since(start)

	require.Equal(t, coordinator.RunFailed, rep.Status)
	require.Equal(t, "1 of 5 resources failed", rep.Error)
	require.Equal(t, "m.yaml", rep.Manifest)
	require.False(t, rep.Noop)
	require.Zero(t, rep.Depth)
	require.Equal(t, bus.DefaultPool, rep.Pool)
	require.Regexp(t, traceID, rep.TraceID)
	require.NotEqual(t, "00000000000000000000000000000000", rep.TraceID)
	require.GreaterOrEqual(t, rep.DurationMS, int64(100))
	require.LessOrEqual(t, rep.DurationMS, elapsed.Milliseconds())
	require.NotNil(t, rep.StartedAt)
	require.NotNil(t, rep.FinishedAt)
	require.Equal(t, coordinator.Counts{Total: 5, Changed: 2, Stable: 1, Failed: 1, Skipped: 1}, rep.Counts)
	require.Equal(t, []string{"file#" + join(dir, "conf"), "exec#slow", "exec#guarded", "exec#broken", "exec#dependent"}, refs(rep))

	conf := rep.Resources[0]
	require.Equal(t, "file", conf.Type)
	require.Equal(t, join(dir, "conf"), conf.Name)
	require.Equal(t, "conf", conf.Alias)
	require.Equal(t, "changed", conf.Status)
	require.Equal(t, "worker-test", conf.Worker)
	require.Equal(t, 1, conf.Attempts)
	require.False(t, conf.Noop)
	slow := rep.Resources[1]
	require.Equal(t, "changed", slow.Status)
	require.GreaterOrEqual(t, slow.DurationMS, int64(100))
	require.Equal(t, "stable", rep.Resources[2].Status)
	broken := rep.Resources[3]
	require.Equal(t, "failed", broken.Status)
	require.Contains(t, broken.Error, "4")
	require.Equal(t, "worker-test", broken.Worker)
	dependent := rep.Resources[4]
	require.Equal(t, "skipped", dependent.Status)
	require.Empty(t, dependent.Worker)
	require.Zero(t, dependent.Attempts)
}

func TestReportEvents(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	dir := t.TempDir()
	runID := tb.submit(t, fmt.Sprintf(`
resources:
  - {type: file, name: %q, content: x}
  - {type: exec, name: e, command: /bin/true}
`, join(dir, "f")))
	rep, events := tb.wait(t, runID)
	var kinds []bus.EventKind
	for _, ev := range events {
		kinds = append(kinds, ev.Kind)
		require.Equal(t, runID, ev.RunID)
		require.Equal(t, "m.yaml", ev.Manifest)
	}
	require.Equal(t, []bus.EventKind{bus.EventRunQueued, bus.EventRunStarted,
		bus.EventTaskDispatched, bus.EventTaskFinished, bus.EventTaskDispatched, bus.EventTaskFinished,
		bus.EventRunFinished}, kinds)
	last := events[len(events)-1]
	require.Equal(t, string(coordinator.RunSucceeded), last.Status)
	require.Equal(t, 2, last.Total)
	require.Equal(t, coordinator.RunSucceeded, rep.Status)
}

func TestGetReportOfUnknownRun(t *testing.T) {
	t.Parallel()
	_, b := setupBus(t)
	_, err := coordinator.GetReport(t.Context(), b, "no-such-run")
	require.ErrorIs(t, err, bus.ErrNotFound)
}

func TestInvalidManifestFailsTheRunBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	dir := t.TempDir()
	runID := tb.submit(t, fmt.Sprintf(`
data: {target: nope}
resources:
  - {type: exec, name: first, provider: shell, command: "touch ran", cwd: %q}
  - {type: exec, name: second, command: /bin/true, require: ["exec#{{ lookup('data.target') }}"]}
`, dir))
	rep, events := tb.wait(t, runID)
	require.Equal(t, coordinator.RunFailed, rep.Status)
	require.Contains(t, rep.Error, "m.yaml:5:")
	require.Contains(t, rep.Error, "exec#nope")
	require.Empty(t, rep.Resources)
	require.False(t, exists(join(dir, "ran")))
	var rejected bool
	for _, ev := range events {
		rejected = rejected || ev.Kind == bus.EventRunRejected
		require.NotEqual(t, bus.EventTaskDispatched, ev.Kind)
	}
	require.True(t, rejected)
}

func TestRetryUntilSuccess(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	dir := t.TempDir()
	// Fails on the first two attempts, succeeds on the third.
	count := `n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; [ $n -ge 3 ]`
	rep := tb.run(t, fmt.Sprintf(`
resources:
  - {type: exec, name: flaky, provider: shell, command: %[2]q, cwd: %[1]q, retry: 2}
  - {type: exec, name: hopeless, provider: shell, command: "echo x >> hopeless; exit 1", cwd: %[1]q, retry: 1}
`, dir, count))

	flaky := resource(t, rep, "exec#flaky")
	require.Equal(t, "changed", flaky.Status, "%+v", flaky)
	require.Equal(t, 3, flaky.Attempts)
	require.Empty(t, flaky.Error)
	hopeless := resource(t, rep, "exec#hopeless")
	require.Equal(t, "failed", hopeless.Status)
	require.Equal(t, 2, hopeless.Attempts)
	require.Equal(t, 2, lines(t, join(dir, "hopeless")))
	require.Equal(t, coordinator.RunFailed, rep.Status)
}

func TestTaskWithoutWorkerFailsAtItsDeadline(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{coord: coordinator.Config{OutcomeGrace: 100 * time.Millisecond}})
	dir := t.TempDir()
	rep := tb.run(t, fmt.Sprintf(`
resources:
  - {type: exec, name: lost, provider: shell, command: "touch lost", cwd: %[1]q, target: nowhere, timeout: 200ms}
  - {type: exec, name: next, provider: shell, command: "touch next", cwd: %[1]q}
`, dir))

	require.Equal(t, coordinator.RunFailed, rep.Status)
	lost := resource(t, rep, "exec#lost")
	require.Equal(t, "failed", lost.Status)
	require.Contains(t, lost.Error, `pool "nowhere"`)
	require.Equal(t, "nowhere", lost.Pool)
	require.Equal(t, "changed", resource(t, rep, "exec#next").Status, "manifest order does not propagate failure")
	require.False(t, exists(join(dir, "lost")))
}

func TestRunIDAndPoolAreValidated(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	runID := tb.submit(t, "resources: []\n", func(r *bus.RunRequest) { r.Pool = "bad.pool" })
	rep, _ := tb.wait(t, runID)
	require.Equal(t, coordinator.RunFailed, rep.Status)
	require.Contains(t, rep.Error, "pool")
}

func TestPinWorkerIsValidated(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	runID := tb.submit(t, "resources: [{type: exec, name: x, command: /bin/true}]\n",
		func(r *bus.RunRequest) { r.PinWorker = "no good" })
	rep, _ := tb.wait(t, runID)
	require.Equal(t, coordinator.RunFailed, rep.Status)
	require.Contains(t, rep.Error, "pin_worker")
	require.Empty(t, rep.Resources, "nothing was dispatched")
}

func TestEmptyManifestSucceeds(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	rep := tb.run(t, "resources: []\n")
	require.Equal(t, coordinator.RunSucceeded, rep.Status)
	require.Zero(t, rep.Counts.Total)
}

func TestDependentsOfAControlSkippedResourceAreSkipped(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	dir := t.TempDir()
	rep := tb.run(t, fmt.Sprintf(`
data: {enabled: false}
resources:
  - {type: exec, name: guarded, provider: shell, command: "touch guarded", cwd: %[1]q, control: {if: "lookup('data.enabled')"}}
  - {type: exec, name: dependent, provider: shell, command: "touch dependent", cwd: %[1]q, require: [exec#guarded]}
  - {type: exec, name: other, provider: shell, command: "touch other", cwd: %[1]q}
`, dir))
	require.Equal(t, coordinator.RunSucceeded, rep.Status, "a skipped resource is not a failure")
	require.Equal(t, coordinator.Counts{Total: 3, Changed: 1, Skipped: 2}, rep.Counts)
	require.Contains(t, resource(t, rep, "exec#guarded").Message, "control if is false")
	require.Equal(t, "skipped: exec#guarded was skipped", resource(t, rep, "exec#dependent").Message)
	require.False(t, exists(join(dir, "guarded")))
	require.False(t, exists(join(dir, "dependent")))
	require.True(t, exists(join(dir, "other")))
}

// TestIdempotencyKeyStartsOneRun: a second request with the same key starts
// nothing. Requests are taken in order, so once a later run finished the
// second request has been seen.
func TestIdempotencyKeyStartsOneRun(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{noWorker: true})
	key := func(r *bus.RunRequest) { r.IdempotencyKey = "deploy-42" }
	first := tb.submit(t, "resources: []\n", key)
	second := tb.submit(t, "resources: []\n", key)
	rep := tb.run(t, "resources: []\n")
	require.Equal(t, coordinator.RunSucceeded, rep.Status)
	rep, _ = tb.wait(t, first)
	require.Equal(t, coordinator.RunSucceeded, rep.Status)
	_, err := coordinator.GetReport(t.Context(), tb.bus, second)
	require.ErrorIs(t, err, bus.ErrNotFound)
}

// TestSlowTaskTimesOutOnTheWorker: a worker stops a task at its deadline
// and reports why; the coordinator does not need its own expiry for it.
func TestSlowTaskTimesOutOnTheWorker(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	dir := t.TempDir()
	rep := tb.run(t, fmt.Sprintf(`
resources:
  - {type: exec, name: own, provider: shell, command: "sleep 10; touch own", cwd: %[1]q, timeout: 1500ms}
  - {type: exec, name: run-default, provider: shell, command: "sleep 10; touch default", cwd: %[1]q}
`, dir), func(r *bus.RunRequest) { r.TaskTimeoutMS = 1600 })
	// Timeouts long enough that a loaded machine (-race, parallel tests)
	// still hands the task to the worker before its deadline.
	own := resource(t, rep, "exec#own")
	require.Equal(t, "failed", own.Status)
	require.Contains(t, own.Error, "timed out after 1.5s")
	require.Equal(t, "worker-test", own.Worker)
	def := resource(t, rep, "exec#run-default")
	require.Equal(t, "failed", def.Status)
	require.Contains(t, def.Error, "timed out after 1.6s")
	require.False(t, exists(join(dir, "own")))
	require.False(t, exists(join(dir, "default")))
}

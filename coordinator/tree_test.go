package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// treeEngine is a real embedded JetStream, a coordinator configured by the
// test and one real worker.
type treeEngine struct {
	*applyEngine
	c *Coordinator
}

func startTreeEngine(t *testing.T, cfg Config, concurrency int) *treeEngine {
	t.Helper()
	_, b := bustest.Start(t, bus.Config{})
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("MANIFOLD_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg.Bus, cfg.Logger, cfg.Name = b, logger, "tree-test"
	c, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(c.Stop)
	w, err := worker.New(worker.Config{Bus: b, Registry: builtin.Registry(), Name: "tree-test", Logger: logger,
		Concurrency: concurrency, CacheDir: t.TempDir()})
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(w.Kill)
	return &treeEngine{applyEngine: &applyEngine{bus: b}, c: c}
}

// blockedChildren is a bundle whose graph-ordered root applies n child
// manifests at once; each child's command marks it started in dir, then
// waits for dir/release.
func blockedChildren(t *testing.T, b *bus.Bus, dir string, n int) string {
	t.Helper()
	files := map[string]string{}
	var root strings.Builder
	root.WriteString("ordering: graph\nresources:\n")
	for i := range n {
		name := fmt.Sprintf("c%02d.yaml", i)
		fmt.Fprintf(&root, "  - {type: apply, name: %s}\n", name)
		files[name] = fmt.Sprintf("resources:\n  - {type: exec, name: wait-%d, provider: shell, cwd: %q, timeout: 60s, "+
			"command: \"touch started-%d; while [ ! -e release ]; do sleep 0.02; done\"}\n", i, dir, i)
	}
	files["manifest.yaml"] = root.String()
	ref, err := b.PutBundle(t.Context(), applyArchive(t, files))
	require.NoError(t, err)
	return ref
}

func startedIn(dir string) int {
	m, _ := filepath.Glob(filepath.Join(dir, "started-*"))
	return len(m)
}

// historyConsumers counts the consumers on the history stream.
func historyConsumers(t *testing.T, b *bus.Bus) int {
	t.Helper()
	js, err := jetstream.New(b.Conn())
	require.NoError(t, err)
	st, err := js.Stream(t.Context(), bus.StreamHistory)
	require.NoError(t, err)
	info, err := st.Info(t.Context())
	require.NoError(t, err)
	return info.State.Consumers
}

// submit submits req and returns a channel that yields the root run's
// report once it finished (nil when it did not within a minute).
func (e *treeEngine) submit(t *testing.T, req bus.RunRequest) <-chan *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	done := make(chan *Report, 1)
	followed := make(chan error, 1)
	go func() {
		followed <- e.bus.FollowEvents(ctx, req.RunID, func(ev bus.Event) bool {
			return ev.Kind != bus.EventRunFinished || ev.RunID != req.RunID
		})
	}()
	require.NoError(t, e.bus.SubmitRun(ctx, req, req.RunID))
	go func() {
		var rep *Report
		if <-followed == nil {
			rep, _ = GetReport(ctx, e.bus, req.RunID)
		}
		done <- rep
	}()
	return done
}

// TestManyChildRunsDoNotStarveOtherRuns: a graph run with 12 apply
// children in progress at once holds one history consumer in all (not one
// per run: the server's consumers would run out), and another run starts
// and finishes meanwhile.
func TestManyChildRunsDoNotStarveOtherRuns(t *testing.T) {
	t.Parallel()
	const n = 12
	e := startTreeEngine(t, Config{}, n+2)
	dir := t.TempDir()
	req := bus.RunRequest{RunID: NewRunID(), Bundle: blockedChildren(t, e.bus, dir, n)}
	tree := e.submit(t, req)
	require.Eventually(t, func() bool { return startedIn(dir) == n }, 50*time.Second, 10*time.Millisecond,
		"every child run started")

	require.Equal(t, 1, historyConsumers(t, e.bus), "history consumers with %d runs in progress", n+1)
	require.Equal(t, n, e.c.trees.count(req.RunID))

	other := t.TempDir()
	rep, _ := e.run(t, bus.RunRequest{ManifestYAML: "resources:\n  - {type: file, name: " + other + "/f, content: x}\n"})
	require.Equal(t, RunSucceeded, rep.Status, "%+v", rep)
	require.FileExists(t, filepath.Join(other, "f"))

	require.NoError(t, os.WriteFile(filepath.Join(dir, "release"), nil, 0o644))
	rep = <-tree
	require.NotNil(t, rep, "the tree did not finish")
	require.Equal(t, RunSucceeded, rep.Status, "%+v", rep.Counts)
	require.Equal(t, n, rep.Counts.Changed)
	require.Zero(t, e.c.trees.count(req.RunID))
}

// TestTreeLiveRunsAreBounded: with MaxTreeLiveRuns 2, a root of 6 apply
// children runs 2 child runs at a time; the others wait (dispatched, not
// failed) while another run starts and finishes, then all run.
func TestTreeLiveRunsAreBounded(t *testing.T) {
	t.Parallel()
	const n = 6
	e := startTreeEngine(t, Config{MaxTreeLiveRuns: 2}, n+2)
	dir := t.TempDir()
	req := bus.RunRequest{RunID: NewRunID(), Bundle: blockedChildren(t, e.bus, dir, n)}
	tree := e.submit(t, req)
	require.Eventually(t, func() bool { return startedIn(dir) == 2 }, 50*time.Second, 10*time.Millisecond)

	other := t.TempDir()
	rep, _ := e.run(t, bus.RunRequest{ManifestYAML: "resources:\n  - {type: file, name: " + other + "/f, content: x}\n"})
	require.Equal(t, RunSucceeded, rep.Status, "%+v", rep)
	require.Equal(t, 2, startedIn(dir), "child runs past the tree's bound started")
	require.Equal(t, 2, e.c.trees.count(req.RunID))

	require.NoError(t, os.WriteFile(filepath.Join(dir, "release"), nil, 0o644))
	rep = <-tree
	require.NotNil(t, rep, "the tree did not finish")
	require.Equal(t, RunSucceeded, rep.Status, "%+v", rep.Counts)
	require.Equal(t, n, rep.Counts.Changed)
	require.Equal(t, n, startedIn(dir))
}

// TestDeepChainWithinABoundOfOne: a self-applying manifest under
// MaxTreeLiveRuns 1 still reaches its depth limit (each run may always
// have one child in progress): the bound never deadlocks a chain.
func TestDeepChainWithinABoundOfOne(t *testing.T) {
	t.Parallel()
	e := startTreeEngine(t, Config{MaxTreeLiveRuns: 1}, 2)
	ref, err := e.bus.PutBundle(t.Context(), applyArchive(t, map[string]string{
		"manifest.yaml": "resources:\n  - apply:\n      - manifest.yaml: {}\n",
	}))
	require.NoError(t, err)
	rep, _ := e.run(t, bus.RunRequest{Bundle: ref, MaxDepth: 5})
	require.Equal(t, RunFailed, rep.Status)
	depth := 0
	for c := rep.Resources[0].Child; c != nil; c = c.Resources[0].Child {
		depth = c.Depth
	}
	require.Equal(t, 5, depth)
}

// TestRequestAbovePolicyIsRejected: a run request may not ask for a
// max_depth or max_tree_runs above the coordinator's policy, on the API
// (an invalid request) or on the fire-and-forget subject (a rejected run).
func TestRequestAbovePolicyIsRejected(t *testing.T) {
	t.Parallel()
	e := startTreeEngine(t, Config{MaxDepthLimit: 20, MaxTreeRunsLimit: 100, MaxTreeRuns: 50}, 1)
	ref, err := e.bus.PutBundle(t.Context(), applyArchive(t, map[string]string{
		"manifest.yaml": "resources:\n  - apply:\n      - manifest.yaml: {}\n",
	}))
	require.NoError(t, err)

	rep, _ := e.run(t, bus.RunRequest{Bundle: ref, MaxDepth: 1000})
	require.Equal(t, RunFailed, rep.Status)
	require.Contains(t, rep.Error, "max_depth 1000 is over the limit of 20 (coordinator --max-depth-limit)")
	require.Empty(t, rep.Resources, "nothing of a rejected run runs")

	rep, _ = e.run(t, bus.RunRequest{Bundle: ref, MaxTreeRuns: 101})
	require.Equal(t, RunFailed, rep.Status)
	require.Contains(t, rep.Error, "max_tree_runs 101 is over the limit of 100 (coordinator --max-tree-runs-limit)")

	data, _ := json.Marshal(bus.RunRequest{Bundle: ref, MaxDepth: 21})
	msg, err := e.bus.Conn().Request(bus.SubjectAPIRunsSubmit, data, 5*time.Second)
	require.NoError(t, err)
	require.Contains(t, string(msg.Data), `"code":"invalid"`)
	require.Contains(t, string(msg.Data), "max_depth 21 is over the limit of 20")

	// At the limit is allowed.
	rep, _ = e.run(t, bus.RunRequest{Bundle: ref, MaxDepth: 20, MaxTreeRuns: 100})
	require.Equal(t, RunFailed, rep.Status) // by its depth, not the policy
	require.NotContains(t, rep.Error, "coordinator --max")

	_, err = New(Config{Bus: e.bus, MaxDepth: 30, MaxDepthLimit: 20})
	require.ErrorContains(t, err, "max depth 30 is over the max depth limit 20")
}

// TestCancelDropsQueuedTasksOfTheTree: with both worker slots busy on long
// commands and ten commands queued behind them, in the root run and in a
// child run, `cancel` kills the running ones and no queued command runs
// afterwards: the worker drops them (the task stream empties without a
// file being created).
func TestCancelDropsQueuedTasksOfTheTree(t *testing.T) {
	t.Parallel()
	e := startTreeEngine(t, Config{}, 2)
	dir := t.TempDir()
	cmd := func(name, line string) string {
		return fmt.Sprintf("  - {type: exec, name: %s, provider: shell, cwd: %q, command: %q}\n", name, dir, line)
	}
	var root, child strings.Builder
	root.WriteString("ordering: graph\nresources:\n")
	child.WriteString("ordering: graph\nresources:\n")
	root.WriteString(cmd("long-a", "touch started-a; sleep 30; touch done-a"))
	root.WriteString(cmd("long-b", "touch started-b; sleep 30; touch done-b"))
	root.WriteString("  - {type: apply, name: child.yaml}\n")
	for i := range 10 {
		root.WriteString(cmd(fmt.Sprintf("queued-%d", i), fmt.Sprintf("touch ran-%d", i)))
		child.WriteString(cmd(fmt.Sprintf("child-%d", i), fmt.Sprintf("touch child-ran-%d", i)))
	}
	ref, err := e.bus.PutBundle(t.Context(), applyArchive(t, map[string]string{
		"manifest.yaml": root.String(), "child.yaml": child.String()}))
	require.NoError(t, err)
	req := bus.RunRequest{RunID: NewRunID(), Bundle: ref}
	tree := e.submit(t, req)
	childID := childRunID(req.RunID, 2, 1)
	require.Eventually(t, func() bool {
		_, errA := os.Stat(filepath.Join(dir, "started-a"))
		_, errB := os.Stat(filepath.Join(dir, "started-b"))
		_, _, errC := loadRecord(t.Context(), e.bus.Runs(), childID)
		return errA == nil && errB == nil && errC == nil
	}, 20*time.Second, 10*time.Millisecond, "both slots busy and the child run started")
	// The child's tasks are queued too before the cancellation.
	require.Eventually(t, func() bool { return queuedTasks(t, e.bus) >= 20 }, 20*time.Second, 10*time.Millisecond)

	data, _ := json.Marshal(bus.CancelRunRequest{RunID: req.RunID})
	msg, err := e.bus.Conn().Request(bus.SubjectAPIRunsCancel, data, 10*time.Second)
	require.NoError(t, err)
	require.NotContains(t, string(msg.Data), `"error"`)

	rep := <-tree
	require.NotNil(t, rep, "the tree did not finish")
	require.Equal(t, RunCancelled, rep.Status)
	rec, _, err := loadRecord(t.Context(), e.bus.Runs(), childID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		rec, _, err = loadRecord(t.Context(), e.bus.Runs(), childID)
		return err == nil && rec.Status.Final()
	}, 20*time.Second, 10*time.Millisecond, "the child run ended")
	require.Equal(t, RunCancelled, rec.Status)
	// Every queued task is taken off the stream by the worker, unexecuted.
	require.Eventually(t, func() bool { return queuedTasks(t, e.bus) == 0 }, 20*time.Second, 10*time.Millisecond,
		"queued tasks of the cancelled tree left")
	ran, _ := filepath.Glob(filepath.Join(dir, "*ran-*"))
	require.Empty(t, ran, "queued commands ran after the cancellation")
	for _, f := range []string{"done-a", "done-b"} {
		require.NoFileExists(t, filepath.Join(dir, f), "a running command was not killed")
	}
}

// queuedTasks is the number of task messages in the tasks stream.
func queuedTasks(t *testing.T, b *bus.Bus) int {
	t.Helper()
	js, err := jetstream.New(b.Conn())
	require.NoError(t, err)
	st, err := js.Stream(t.Context(), bus.StreamTasks)
	require.NoError(t, err)
	info, err := st.Info(t.Context())
	require.NoError(t, err)
	return int(info.State.Msgs)
}

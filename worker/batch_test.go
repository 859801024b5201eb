package worker_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/schemas"
	"github.com/manifold-run/manifold/worker"
)

// The argv the package providers run, and their outputs recorded on
// Debian 12 (resources/pkg/testdata).
var (
	aptInstall = []string{"apt-get", "-y", "-q", "-o", "DPkg::Lock::Timeout=300", "-o", "DPkg::Options::=--force-confold", "install"}
	rpmQuery   = []string{"rpm", "-q", "--queryformat", "%{NAME} %|EPOCH?{%{EPOCH}}:{0}| %{VERSION} %{RELEASE} %{ARCH}\n"}
)

func dpkgQuery(name string) []string {
	return []string{"dpkg-query", "-W", "-f=${Package} ${Version} ${Architecture} ${db:Status-Status}\n", name}
}

func pkgOutput(t *testing.T, name string) string {
	t.Helper()
	if name == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join("..", "resources", "pkg", "testdata", name))
	require.NoError(t, err)
	return string(b)
}

func replayStep(t *testing.T, exit int, stdout, stderr string, argv ...string) resources.ReplayStep {
	t.Helper()
	return resources.ReplayStep{Argv: argv, ExitCode: exit, Stdout: pkgOutput(t, stdout), Stderr: pkgOutput(t, stderr)}
}

// notInstalled and installed are dpkg-query's recorded answers.
func notInstalled(t *testing.T, name string) resources.ReplayStep {
	return replayStep(t, 1, "", "apt/dpkg-query-"+name+"-absent.stderr", dpkgQuery(name)...)
}

func installed(t *testing.T, name string) resources.ReplayStep {
	return replayStep(t, 0, "apt/dpkg-query-"+name+"-installed.stdout", "", dpkgQuery(name)...)
}

// aptGet is apt-get install of names with the recorded outputs of file.
func aptGet(t *testing.T, exit int, file string, names ...string) resources.ReplayStep {
	return replayStep(t, exit, "apt/"+file+".stdout", "apt/"+file+".stderr", append(slices.Clone(aptInstall), names...)...)
}

// debianHost is a replay runner on a Debian host (and, with dnf, one that
// has dnf too).
func debianHost(dnf bool, steps ...resources.ReplayStep) *resources.ReplayRunner {
	r := resources.NewReplayRunner(steps...)
	r.SetPrograms("apt-get", "apt-cache", "dpkg-query")
	if dnf {
		r.SetPrograms("dnf", "rpm")
	}
	return r
}

func pkgResource(name string) schemas.Resource {
	return schemas.Resource{Type: "package", Name: name, Ensure: "present"}
}

// segment returns one task holding rs as a segment (ordering: manifest),
// tasks 0, 1, ...
func (tb *testBundle) segment(rs ...schemas.Resource) bus.Task {
	task := tb.task(0, rs[0])
	for i, r := range rs[1:] {
		task.Segment = append(task.Segment, bus.SegmentItem{Task: i + 1, Attempt: 1, Resource: r, TimeoutMS: 30_000})
	}
	return task
}

// managerCommands returns the install commands the runner ran.
func managerCommands(r *resources.ReplayRunner) [][]string {
	var out [][]string
	for _, c := range r.Calls() {
		if c.Argv[0] == "apt-get" || c.Argv[0] == "dnf" {
			out = append(out, c.Argv)
		}
	}
	return out
}

// TestSegmentPackagesShareOneTransaction: consecutive packages of a
// segment are installed by one apt-get install, each answered by its own
// outcome in order, with its own span; the transaction has a span too.
func TestSegmentPackagesShareOneTransaction(t *testing.T) {
	t.Parallel()
	var steps []resources.ReplayStep
	for _, n := range []string{"sl", "hello", "tree"} {
		// check, the batch's read under the lock, re-check
		steps = append(steps, notInstalled(t, n), notInstalled(t, n), installed(t, n))
	}
	steps = append(steps, aptGet(t, 0, "apt-get-install-sl-hello-tree", "sl", "hello", "tree"))
	runner := debianHost(false, steps...)
	spans := tracetest.NewInMemoryExporter()
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{Runner: runner, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))})
	path := filepath.Join(t.TempDir(), "f")
	tb.publish(t, tb.segment(pkgResource("sl"), pkgResource("hello"), pkgResource("tree"),
		schemas.Resource{Type: "file", Name: path, Properties: map[string]any{"content": "x"}}))

	for i, ref := range []string{"package#sl", "package#hello", "package#tree", "file#" + path} {
		o := tb.next(t)
		require.Equal(t, i, o.Task, "%+v", o)
		require.Equal(t, ref, o.Ref)
		require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	}
	require.Equal(t, [][]string{append(slices.Clone(aptInstall), "sl", "hello", "tree")}, managerCommands(runner))
	require.NoError(t, runner.Verify())

	byID := map[string]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		byID[s.SpanContext.SpanID().String()] = s
	}
	var batch tracetest.SpanStub
	execs := map[string]bool{}
	for _, s := range spans.GetSpans() {
		switch {
		case s.Name == "execute batch":
			batch = s
		case len(s.Name) > 8 && s.Name[:8] == "execute ":
			execs[s.Name] = true
		}
	}
	require.Len(t, execs, 4, "one execute span per resource: %v", execs)
	require.Equal(t, "execute package#sl", byID[batch.Parent.SpanID().String()].Name)
	require.Len(t, batch.Links, 3)
	var under []string
	for _, s := range spans.GetSpans() {
		if s.Parent.SpanID() == batch.SpanContext.SpanID() {
			under = append(under, s.Name)
		}
	}
	require.Equal(t, []string{"apply batch"}, under)
}

// TestBatchesDoNotCrossOtherResources: a file between packages, and a
// package of another provider, end a batch: each package is installed
// alone here.
func TestBatchesDoNotCrossOtherResources(t *testing.T) {
	t.Parallel()
	rpmTcsh := append(slices.Clone(rpmQuery), "tcsh")
	runner := debianHost(true,
		notInstalled(t, "sl"), notInstalled(t, "sl"), installed(t, "sl"),
		aptGet(t, 0, "apt-get-install-sl", "sl"),
		notInstalled(t, "hello"), notInstalled(t, "hello"), installed(t, "hello"),
		aptGet(t, 0, "apt-get-install-hello", "hello"),
		replayStep(t, 1, "dnf/rpm-q-tcsh-absent.stdout", "", rpmTcsh...),
		replayStep(t, 1, "dnf/rpm-q-tcsh-absent.stdout", "", rpmTcsh...),
		replayStep(t, 0, "dnf/dnf-install-tcsh.stdout", "", "dnf", "-y", "install", "tcsh"),
		replayStep(t, 0, "dnf/rpm-q-tcsh.stdout", "", rpmTcsh...),
	)
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{Runner: runner})
	path := filepath.Join(t.TempDir(), "f")
	tcsh := pkgResource("tcsh")
	tcsh.Provider = "dnf"
	tb.publish(t, tb.segment(pkgResource("sl"), schemas.Resource{Type: "file", Name: path, Properties: map[string]any{"content": "x"}},
		pkgResource("hello"), tcsh))
	for i := range 4 {
		o := tb.next(t)
		require.Equal(t, i, o.Task, "%+v", o)
		require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	}
	require.Equal(t, [][]string{
		append(slices.Clone(aptInstall), "sl"),
		append(slices.Clone(aptInstall), "hello"),
		{"dnf", "-y", "install", "tcsh"},
	}, managerCommands(runner))
	require.NoError(t, runner.Verify())
}

// TestFailedBatchFallsBackAndEndsTheSegment: apt refuses the transaction
// for an unknown package; the packages are installed one by one, the
// unknown one fails with apt's reason, and the segment ends there as it
// would without batching: the package after it is not installed, and the
// file after it is not written.
func TestFailedBatchFallsBackAndEndsTheSegment(t *testing.T) {
	t.Parallel()
	const bad = "manifold-no-such-pkg"
	unknown := replayStep(t, 1, "", "apt/dpkg-query-unknown.stderr", dpkgQuery(bad)...)
	runner := debianHost(false,
		notInstalled(t, "hello"), notInstalled(t, "hello"), unknown, unknown, notInstalled(t, "tree"), notInstalled(t, "tree"),
		aptGet(t, 100, "apt-get-install-hello-unknown-tree", "hello", bad, "tree"),
		notInstalled(t, "hello"), aptGet(t, 0, "apt-get-install-hello", "hello"), installed(t, "hello"),
		unknown, aptGet(t, 100, "apt-get-install-unknown", bad),
	)
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{Runner: runner})
	path := filepath.Join(t.TempDir(), "f")
	tb.publish(t, tb.segment(pkgResource("hello"), pkgResource(bad), pkgResource("tree"),
		schemas.Resource{Type: "file", Name: path, Properties: map[string]any{"content": "x"}}))

	o := tb.next(t)
	require.Equal(t, 0, o.Task)
	require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	o = tb.next(t)
	require.Equal(t, 1, o.Task)
	require.Equal(t, bus.TaskFailed, o.Status, "%+v", o)
	require.Contains(t, o.Error, "E: Unable to locate package "+bad)
	tb.none(t, 300*time.Millisecond)
	require.False(t, exists(path))
	require.Equal(t, [][]string{
		append(slices.Clone(aptInstall), "hello", bad, "tree"),
		append(slices.Clone(aptInstall), "hello"),
		append(slices.Clone(aptInstall), bad),
	}, managerCommands(runner))
	require.NoError(t, runner.Verify())
}

// TestBatchSkipsRecordedResources: a resource whose outcome an earlier
// message of the task recorded is answered from the record, not executed nor
// batched; the packages after it still share one transaction.
func TestBatchSkipsRecordedResources(t *testing.T) {
	t.Parallel()
	runner := debianHost(false,
		notInstalled(t, "sl"), notInstalled(t, "sl"), installed(t, "sl"),
		notInstalled(t, "tree"), notInstalled(t, "tree"), installed(t, "tree"),
		aptGet(t, 0, "apt-get-install-sl-tree", "sl", "tree"),
	)
	tb := setup(t, bus.Config{})
	task := tb.segment(pkgResource("hello"), pkgResource("sl"), pkgResource("tree"))
	// Published again by a resuming coordinator: a first delivery of an
	// unmarked task has no record to look for.
	task.Resumed = true
	rec := bus.Outcome{V: bus.Version, RunID: tb.runID, Task: 0, Attempt: 1, Ref: "package#hello", Status: bus.TaskChanged, Changed: true, Message: "installed"}
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	_, err = tb.bus.Results().Put(t.Context(), fmt.Sprintf("%s.0.1", tb.runID), data)
	require.NoError(t, err)
	tb.start(t, worker.Config{Runner: runner})
	tb.publish(t, task)

	o := tb.next(t)
	require.Equal(t, 0, o.Task)
	require.True(t, o.Replayed, "%+v", o)
	for i := 1; i <= 2; i++ {
		o = tb.next(t)
		require.Equal(t, i, o.Task)
		require.False(t, o.Replayed)
		require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
	}
	require.Equal(t, [][]string{append(slices.Clone(aptInstall), "sl", "tree")}, managerCommands(runner))
	for _, c := range runner.Calls() {
		require.NotEqual(t, dpkgQuery("hello"), c.Argv, "the recorded resource was executed")
	}
	require.NoError(t, runner.Verify())
}

// TestNoopSegmentNeverInstalls: packages of a noop run are only queried.
func TestNoopSegmentNeverInstalls(t *testing.T) {
	t.Parallel()
	runner := debianHost(false, notInstalled(t, "sl"), notInstalled(t, "hello"))
	tb := setup(t, bus.Config{})
	tb.start(t, worker.Config{Runner: runner})
	task := tb.segment(pkgResource("sl"), pkgResource("hello"))
	task.Noop = true
	tb.publish(t, task)
	for i := range 2 {
		o := tb.next(t)
		require.Equal(t, i, o.Task)
		require.Equal(t, bus.TaskChanged, o.Status, "%+v", o)
		require.Equal(t, "would install", o.Message)
	}
	require.Empty(t, managerCommands(runner))
	require.NoError(t, runner.Verify())
}

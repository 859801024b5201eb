package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/schemas"
)

func TestManifestIsValidCCMBlockShape(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, ord := range []Ordering{"", OrderingGraph} {
		spec := filesSpec{dir: dir, n: 3, owner: "nobody", group: "nogroup", exec: true, ordering: ord}
		m, err := schemas.Parse("bench.yaml", []byte(spec.yaml()))
		if err != nil {
			t.Fatalf("ordering %q: %v\n%s", ord, err, spec.yaml())
		}
		if len(m.Resources) != spec.resources() {
			t.Fatalf("ordering %q: %d resources, want %d", ord, len(m.Resources), spec.resources())
		}
		if got, want := m.Resources[2].Name, spec.fileName(2); got != want {
			t.Errorf("third resource %q, want %q", got, want)
		}
		if got := m.Resources[3].Type; got != "exec" {
			t.Errorf("last resource of type %q, want exec", got)
		}
	}
	if _, err := schemas.Parse("parent.yaml", []byte(applyLevelYAML("child/manifest.yaml"))); err != nil {
		t.Fatalf("apply level manifest: %v", err)
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	for _, tc := range []struct {
		in       []time.Duration
		med, p99 time.Duration
	}{
		{nil, 0, 0},
		{ms(5), 5 * time.Millisecond, 5 * time.Millisecond},
		{ms(9, 1, 5), 5 * time.Millisecond, 9 * time.Millisecond},
		{ms(4, 1, 3, 2), 2500 * time.Microsecond, 4 * time.Millisecond},
	} {
		if got := median(tc.in); got != tc.med {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.med)
		}
		if got := percentile(tc.in, 99); got != tc.p99 {
			t.Errorf("percentile(%v, 99) = %v, want %v", tc.in, got, tc.p99)
		}
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(100-i) * time.Millisecond
	}
	if got := percentile(hundred, 50); got != 50*time.Millisecond {
		t.Errorf("p50 of 1..100 ms = %v", got)
	}
	if got := percentile(hundred, 99); got != 99*time.Millisecond {
		t.Errorf("p99 of 1..100 ms = %v", got)
	}
	if got := medianFloat([]float64{3, 1, 2, 10}); got != 2.5 {
		t.Errorf("medianFloat = %v, want 2.5", got)
	}
}

func TestFloorConvergesAndRepairsDrift(t *testing.T) {
	t.Parallel()
	spec := filesSpec{dir: t.TempDir(), n: 5, exec: true}
	uid, gid := os.Geteuid(), os.Getegid()
	for _, step := range []struct {
		name  string
		drift bool
		apply bool
		want  int
	}{
		{"first", false, true, 6},
		{"converged", false, true, 0},
		{"drift noop", true, false, 3},
		{"drift noop leaves the drift", false, false, 3},
		{"drift apply", false, true, 3},
		{"converged again", false, true, 0},
	} {
		if step.drift {
			if _, err := spec.drift(); err != nil {
				t.Fatal(err)
			}
		}
		got, err := floorPass(spec, uid, gid, step.apply)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got != step.want {
			t.Fatalf("%s: %d changed, want %d", step.name, got, step.want)
		}
	}
	if err := spec.verify(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(spec.fileName(0)); err != nil || fi.Mode().Perm() != floorMode {
		t.Fatalf("mode of %s: %v, %v", spec.fileName(0), fi.Mode(), err)
	}
	res, err := floorRun(spec, uid, gid, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []Scenario{ScenarioFirst, ScenarioConverged, ScenarioNoop, ScenarioDrift} {
		if res[sc] <= 0 {
			t.Errorf("floor %s: no time", sc)
		}
	}
}

func TestRunnerKillsAtTimeout(t *testing.T) {
	t.Parallel()
	id, err := currentIdentity()
	if err != nil {
		t.Fatal(err)
	}
	// t.TempDir's parent is closed to other users: the unprivileged child
	// needs a home it can reach.
	home, err := os.MkdirTemp("", "bench-runner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chmod(home, 0o777); err != nil {
		t.Fatal(err)
	}
	r := &runner{id: id, home: home}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	// sh starts a child in the same group: the whole group must die.
	start := time.Now()
	s := r.run(t.Context(), 300*time.Millisecond, "", "/bin/sh", "-c", sleep+" 30 & "+sleep+" 30")
	if !s.timeout || !errors.Is(s.err, errTimeout) {
		t.Fatalf("want a timeout, got %+v (%v)", s, s.err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the timed out process took %s to end", took)
	}
	s = r.run(t.Context(), 10*time.Second, "", "/bin/sh", "-c", "id -u; exit 3")
	if s.err == nil || s.timeout {
		t.Fatalf("exit 3: want an error, got %+v", s)
	}
	s = r.run(t.Context(), 10*time.Second, "", "/bin/sh", "-c", "id -u")
	if s.err != nil || strings.TrimSpace(string(s.stdout)) != strconv.Itoa(id.uid) {
		t.Fatalf("id -u: %q, %v; want %d", s.stdout, s.err, id.uid)
	}
	if s.rssKiB <= 0 || s.wall <= 0 {
		t.Fatalf("no rusage: %+v", s)
	}
	// A child that spins reports its CPU time (GNU time's %U %S, or wait4's).
	s = r.run(t.Context(), 30*time.Second, "", "/bin/sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done")
	if s.err != nil || s.cpu <= 0 || s.rssKiB <= 0 {
		t.Fatalf("spinning child: cpu %s, rss %d KiB, %v", s.cpu, s.rssKiB, s.err)
	}
}

// TestToolVersion: the harness reads a tool's --version on stdout, or on
// stderr when stdout is empty (CCM prints "development" there).
func TestToolVersion(t *testing.T) {
	id, err := currentIdentity()
	if err != nil {
		t.Fatal(err)
	}
	home, err := os.MkdirTemp("", "bench-version-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chmod(home, 0o777); err != nil {
		t.Fatal(err)
	}
	r := &runner{id: id, home: home}
	type script struct{ bin, text, want string }
	var scripts []script
	for text, want := range map[string]string{
		"echo development >&2":                 "development",
		"echo v1.2.3; echo warning >&2":        "v1.2.3",
		"echo nothing to say >&2; exit 1":      "",
		"printf 'ccm version 0.0.1\\n\\n' >&2": "ccm version 0.0.1",
	} {
		bin := filepath.Join(home, fmt.Sprintf("tool-%d", len(scripts)+1))
		if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+text+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		scripts = append(scripts, script{bin, text, want})
	}
	// The scripts are written before the parallel tests run: a process
	// they fork while a script is open for writing holds it open, and
	// running the script then fails with "text file busy" (ETXTBSY).
	t.Parallel()
	for _, s := range scripts {
		got, err := toolVersion(t.Context(), r, s.bin)
		if s.want == "" {
			if err == nil {
				t.Errorf("%q: want an error, got version %q", s.text, got)
			}
			continue
		}
		if err != nil || got != s.want {
			t.Errorf("%q: got %q, %v; want %q", s.text, got, err, s.want)
		}
	}
}

func TestMainRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--sizes", "0"},
		{"--sizes", "x"},
		{"--reps", "101"},
		{"--workers", "17"},
		{"--modes", "fast"},
		{"--modes", "fleet", "--fleet-hosts", "0"},
		{"--fleet-hosts", "x"},
		{"--fleet-hosts", "20001"},
		{"--fleet-resources", "1001"},
		{"--fleet-runs", "101"},
		{"--fleet-executor", "disk"},
		{"--fleet-idle", "31m"},
		{"--fleet-idle", "999ms"},
		{"extra"},
	} {
		var out, errw strings.Builder
		if code := Main(t.Context(), append(args, "--root", "/nonexistent"), &out, &errw); code != 2 {
			t.Errorf("%v: exit %d, want 2; %s", args, code, errw.String())
		}
		if errw.Len() == 0 {
			t.Errorf("%v: no error message", args)
		}
	}
	// The bus floor's hidden command.
	for _, args := range [][]string{
		{busFloorCommand},
		{busFloorCommand, "--server", "nats://127.0.0.1:1", "--role", "boss"},
		{busFloorCommand, "--server", "nats://127.0.0.1:1", "--role", "client", "--trips", "0"},
	} {
		var out, errw strings.Builder
		if code := Main(t.Context(), args, &out, &errw); code != 2 || !strings.Contains(errw.String(), "--role worker|client") {
			t.Errorf("%v: exit %d, want 2 and the usage; %s", args, code, errw.String())
		}
	}
}

func TestMemTotal(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"24684084 kB": "23.5 GiB", "1048576 kB": "1.0 GiB", "odd": "odd", "": ""} {
		if got := memTotal(in); got != want {
			t.Errorf("memTotal(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestConfigLimits(t *testing.T) {
	t.Parallel()
	ok := Config{Root: "/x"}.WithDefaults()
	if err := ok.validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, c := range map[string]Config{
		"size 0":         {Root: "/x", Sizes: []int{0}},
		"size past max":  {Root: "/x", Sizes: []int{MaxSize + 1}},
		"reps past max":  {Root: "/x", Reps: MaxReps + 1},
		"workers 17":     {Root: "/x", Workers: []int{MaxWorkers + 1}},
		"unknown mode":   {Root: "/x", Modes: []Mode{"fast"}},
		"fleet of 0":     {Root: "/x", FleetHosts: []int{0}},
		"negative live":  {Root: "/x", FleetLiveRuns: -1},
		"idle past max":  {Root: "/x", FleetIdle: MaxFleetIdle + time.Second},
		"idle under 1s":  {Root: "/x", FleetIdle: time.Second - 1},
		"unknown pulls":  {Root: "/x", FleetPulls: "some"},
		"no module root": {},
	} {
		if err := c.WithDefaults().validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	at := Config{Root: "/x", Sizes: []int{MaxSize}, Reps: MaxReps, Workers: []int{MaxWorkers}, FleetIdle: MaxFleetIdle}.WithDefaults()
	if err := at.validate(); err != nil {
		t.Errorf("at the limits: %v", err)
	}
	if ok.FleetPulls != PullsShared {
		t.Errorf("pulls by default: %s, want %s", ok.FleetPulls, PullsShared)
	}
	if ok.FleetIdle != 5*time.Second {
		t.Errorf("idle window by default: %s, want 5s", ok.FleetIdle)
	}
	if got := ok.repsFor(20000); got != 3 {
		t.Errorf("reps at 20,000: %d, want 3", got)
	}
	if got := ok.timeoutFor(2000); got != 100*time.Second {
		t.Errorf("timeout at 2,000: %s, want 100s", got)
	}
}

// TestSmoke runs every mode once on one resource (a few seconds once the
// binary is built).
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs manifold")
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var log strings.Builder
	res, err := Run(ctx, Config{Root: filepath.Dir(strings.TrimSpace(string(out))), Sizes: []int{1}, Reps: 1,
		Workers: []int{1}, DistN: 3, ChainN: 3}, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if res.failed() {
		var md strings.Builder
		res.Markdown(&md)
		t.Fatalf("a measurement failed:\n%s\n%s", md.String(), log.String())
	}
	f := res.Files[0]
	for _, sc := range scenarios {
		c := f.cells[sc]["manifold"]
		if c.wall() <= 0 || c.rssKiB() <= 0 {
			t.Errorf("%s: wall %s, rss %d KiB", sc, c.wall(), c.rssKiB())
		}
	}
	if len(f.breakdowns) != 1 || f.breakdownErr != nil {
		t.Errorf("breakdowns of the converged apply: %+v, %v", f.breakdowns, f.breakdownErr)
	} else if b := f.breakdowns[0]; b.processStart <= 0 || b.compile <= 0 || b.run <= 0 || b.engineUp <= 0 ||
		b.processStart+b.compile+b.engine+b.run+b.report+b.shutdown+b.exit != b.wall {
		t.Errorf("breakdown %+v", b)
	}
	if res.Level.Tools[0].Parent <= 0 || res.Dist.Rows[0].TasksPerSec <= 0 || res.Dist.Latency.Tasks != 3 {
		t.Errorf("level %+v, dist %+v, latency %+v", res.Level.Tools[0], res.Dist.Rows, res.Dist.Latency)
	}
	if f := res.Dist.Latency.Floor; f == nil || f.Err != nil || f.P50 <= 0 || f.P99 < f.P50 || f.Trips != floorWarmup {
		t.Errorf("bus floor %+v", f)
	}
	var md strings.Builder
	res.Markdown(&md)
	for _, want := range []string{"### N = 1 ", "| converged apply |", "## One apply level", "| 1 |", "per-task overhead p50", "| process start | flags, facts, compile |", "| bus floor p50 / p99"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// The harness measures the binary users run: built as deploy/Dockerfile
// builds the image's (static, stripped).
func TestHarnessBuildsAsTheImage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "Dockerfile"))
	require.NoError(t, err)
	dockerfile := strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\\\n", " ")), " ")
	require.Equal(t, []string{"CGO_ENABLED=0"}, releaseBuildEnv)
	require.Equal(t, `-trimpath -pgo=cmd/manifold/release.pgo -ldflags "-s -w"`, releaseBuildCommandFlags())
	require.Contains(t, dockerfile, `CGO_ENABLED=0 go build -trimpath -pgo=cmd/manifold/release.pgo -ldflags "-s -w `)
}

// TestScenarioTurns: every scenario is measured, validate and first apply
// each in a block of its own first, then converged, noop and drift in
// turns, each repetition starting one further.
func TestScenarioTurns(t *testing.T) {
	var all []Scenario
	for _, b := range scenarioBlocks {
		all = append(all, b...)
	}
	if !slices.Equal(all, scenarios) {
		t.Fatalf("blocks %v hold %v, want every scenario once: %v", scenarioBlocks, all, scenarios)
	}
	cnd := []Scenario{ScenarioConverged, ScenarioNoop, ScenarioDrift}
	for rep, want := range [][]Scenario{
		{ScenarioConverged, ScenarioNoop, ScenarioDrift},
		{ScenarioNoop, ScenarioDrift, ScenarioConverged},
		{ScenarioDrift, ScenarioConverged, ScenarioNoop},
		{ScenarioConverged, ScenarioNoop, ScenarioDrift},
	} {
		if got := turn(cnd, rep); !slices.Equal(got, want) {
			t.Errorf("repetition %d: %v, want %v", rep, got, want)
		}
	}
}

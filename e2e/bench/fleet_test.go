package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/schemas"
)

func TestFleetManifestParses(t *testing.T) {
	t.Parallel()
	m, err := schemas.Parse("fleet.yaml", []byte(fleetYAML(3)))
	if err != nil {
		t.Fatalf("%v\n%s", err, fleetYAML(3))
	}
	if len(m.Resources) != 3 || m.Resources[2].Name != "/manifold-fleet/f002.conf" || m.Resources[2].Type != "file" {
		t.Fatalf("resources %+v", m.Resources)
	}
}

func TestHostRegistries(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, fleetDir), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := resources.Spec{Type: "file", Name: fleetFile(0), Ensure: "present", Properties: map[string]any{"content": "host-00001 file 0\n"}}
	for _, tc := range []struct {
		name string
		reg  *resources.Registry
	}{{"file", hostRegistry(root)}, {"memory", memoryRegistry()}} {
		for i, want := range []bool{true, false} {
			r, err := tc.reg.New(spec)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			out := resources.Execute(t.Context(), r, &resources.Env{})
			if out.Err != nil || out.Changed != want {
				t.Fatalf("%s, apply %d: changed %v, %v; want changed %v", tc.name, i+1, out.Changed, out.Err, want)
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(root, fleetFile(0)))
	if err != nil || string(b) != "host-00001 file 0\n" {
		t.Fatalf("the file executor wrote %q, %v under the host's root", b, err)
	}
	if _, err := hostRegistry(root).New(resources.Spec{Type: "file", Name: "relative"}); err == nil {
		t.Error("a relative path was accepted")
	}
}

func TestSpliceFleet(t *testing.T) {
	t.Parallel()
	const sec = "## Fleet\n\nnew\n"
	for _, tc := range []struct{ name, in, want string }{
		{"empty file", "", "\n\n" + sec},
		{"no fleet section", "# R\n\n## Files\n\nx\n", "# R\n\n## Files\n\nx\n\n" + sec},
		{"last section", "# R\n\n## Fleet\n\nold\nold\n", "# R\n\n" + sec},
		{"middle section", "# R\n\n## Fleet\n\nold\n\n## Fleet analysis\n\nkept\n", "# R\n\n" + sec + "## Fleet analysis\n\nkept\n"},
	} {
		if got := spliceFleet(tc.in, sec); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestProcFigures(t *testing.T) {
	t.Parallel()
	pid := os.Getpid()
	if rss := procStatus(pid, "VmRSS"); rss <= 0 {
		t.Errorf("VmRSS of the test: %d KiB", rss)
	}
	// Burn some CPU so the figure moves past a clock tick.
	before, deadline := procCPU(pid), time.Now().Add(5*time.Second)
	for procCPU(pid) <= before && time.Now().Before(deadline) {
		for i := range 1_000_000 {
			_ = i * i
		}
	}
	if after := procCPU(pid); after <= before {
		t.Errorf("CPU time did not grow: %s then %s", before, after)
	}
	if procCPU(-1) != 0 || procStatus(-1, "VmRSS") != 0 {
		t.Error("figures of a missing process must be 0")
	}
}

// TestFleet runs mode fleet at 20 hosts × 3 resources (two runs) through
// the command line: a real server, coordinator and host process. It checks
// the printed lines' shape and every host's files.
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs manifold")
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	// The hosts run as nobody when the test is root: their root must be
	// reachable (t.TempDir's parent is not).
	root, err := os.MkdirTemp("", "bench-fleet-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	id, err := currentIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(root, id.uid, id.gid); err != nil {
		t.Fatal(err)
	}
	const hosts, files = 20, 3
	var stdout, stderr strings.Builder
	code := Main(t.Context(), []string{"--root", filepath.Dir(strings.TrimSpace(string(out))), "--modes", "fleet",
		"--fleet-hosts", "20", "--fleet-resources", "3", "--fleet-runs", "2", "--fleet-per-process", "8", "--fleet-root", root, "--fleet-idle", "2s"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	line := regexp.MustCompile(`(?m)^fleet hosts=20 resources=3 wall=(\d+\.\d\d)s server_rss_mb=(\d+) coordinator_cpu_ms_per_host=(\d+\.\d+)$`)
	m := line.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no fleet line in\n%s", stdout.String())
	}
	if m[1] == "0.00" || m[2] == "0" {
		t.Errorf("wall %ss, server RSS %s MiB: want figures", m[1], m[2])
	}
	mem := regexp.MustCompile(`(?m)^fleet hosts=20 runs=2 server_rss_mb_first=[1-9]\d* server_rss_mb_last=[1-9]\d* coordinator_rss_mb_first=[1-9]\d* coordinator_rss_mb_last=[1-9]\d* server_rss_mb_max_first_half=[1-9]\d* server_rss_mb_max_second_half=[1-9]\d* server_rss_flat=unknown steady_runs=0 server_rss_mb_steady_max_first_half=0 server_rss_mb_steady_max_second_half=0 server_rss_steady_flat=unknown server_heap_mb_first=[1-9]\d* server_heap_mb_last=[1-9]\d* server_heap_mb_steady_max_first_half=0 server_heap_mb_steady_max_second_half=0 server_heap_mb_steady_per_run=0.00 server_heap_flat=unknown$`)
	if !mem.MatchString(stdout.String()) {
		t.Errorf("no memory line in\n%s", stdout.String())
	}
	for _, want := range []string{"## Fleet", "| 20 | 3 |", "idle CPU: over 2s with every host registered"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, stdout.String())
		}
	}
	for i := 1; i <= hosts; i++ {
		for j := range files {
			p := filepath.Join(root, hostName(i), fleetFile(j))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if want := hostName(i) + " file " + string(rune('0'+j)) + "\n"; string(b) != want {
				t.Errorf("%s holds %q, want %q", p, b, want)
			}
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != hosts {
		t.Errorf("%d host roots, want %d", len(entries), hosts)
	}
}

// TestRaiseFileLimit: asked for more open files than the hard limit
// allows an unprivileged process, the harness takes the hard limit as its
// soft one and says, naming both figures, that it is short; asked for
// what the hard limit allows, it raises the soft limit to that and says
// nothing. (Not parallel: the limit is the process's.)
func TestRaiseFileLimit(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if orig.Max < 512 || orig.Max >= 1<<40 {
		t.Skipf("hard open files limit %d", orig.Max)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	lower := func() {
		l := orig
		l.Cur = 256
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			t.Fatal(err)
		}
	}
	soft := func() uint64 {
		var l syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			t.Fatal(err)
		}
		return l.Cur
	}

	lower()
	got, err := raiseFileLimit(int(orig.Max))
	if err != nil || got != orig.Max || soft() != orig.Max {
		t.Fatalf("at the hard limit %d: got %d (soft %d), %v", orig.Max, got, soft(), err)
	}

	lower()
	want := int(orig.Max) + 4096
	got, err = raiseFileLimit(want)
	var now syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now)
	if now.Max >= uint64(want) {
		t.Skipf("privileged: the hard limit was raised to %d", now.Max)
	}
	if err == nil {
		t.Fatalf("past the hard limit %d: no error", orig.Max)
	}
	msg := err.Error()
	if got != orig.Max || soft() != orig.Max || !strings.Contains(msg, "hard limit is "+strconv.FormatUint(orig.Max, 10)) ||
		!strings.Contains(msg, strconv.Itoa(want)+" asked") {
		t.Fatalf("past the hard limit: got %d (soft %d), error %q", got, soft(), msg)
	}
}

// TestHostsStartTimeout: the start of the hosts is bounded by a minute
// and 60 ms a host: 2 minutes for 1,000 hosts, 11 for 10,000.
func TestHostsStartTimeout(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]time.Duration{1000: 2 * time.Minute, 10000: 11 * time.Minute} {
		if got := hostsStartTimeout(n); got != want {
			t.Errorf("hostsStartTimeout(%d) = %s, want %s", n, got, want)
		}
	}
}

// TestRSSFlat: server RSS after consecutive runs counts as flat when the
// second half's highest stays within rssFlatMargin of the first half's,
// and MemoryLine says so (unknown below 4 runs).
func TestRSSFlat(t *testing.T) {
	for _, c := range []struct {
		rss  []int64
		flat bool
	}{
		{[]int64{270, 320, 420, 380, 440, 400, 430, 460}, true},  // 440 -> 460: +4.5 %
		{[]int64{270, 300, 330, 360, 390, 420, 450, 480}, false}, // grows every run
		{[]int64{400, 300, 300, 300, 439, 300}, true},            // the margin: 440 allowed
		{[]int64{400, 300, 300, 300, 441, 300}, false},
		{[]int64{100, 300, 200}, true}, // odd count: the middle one is in the first half
		{[]int64{100, 200, 300}, false},
	} {
		if got := rssFlat(c.rss); got != c.flat {
			t.Errorf("rssFlat(%v) = %v, want %v", c.rss, got, c.flat)
		}
	}
	row := &FleetRow{Hosts: 10, Walls: make([]time.Duration, 4), ServerRSSKiB: []int64{100 << 10, 200 << 10, 150 << 10, 210 << 10}}
	if got, want := row.MemoryLine(), "server_rss_mb_max_first_half=200 server_rss_mb_max_second_half=210 server_rss_flat=true "; !strings.Contains(got, want) {
		t.Errorf("MemoryLine() = %q, want it to hold %q", got, want)
	}
	row.ServerRSSKiB = row.ServerRSSKiB[:3]
	if got := row.MemoryLine(); !strings.Contains(got, "server_rss_flat=unknown ") {
		t.Errorf("MemoryLine() with 3 runs = %q, want server_rss_flat=unknown", got)
	}
}

// TestSteadyFlat: the steady verdicts take only the samples after runs
// that ended fleetWarmup or more after the first: memory that fills the
// duplicate windows over the first minutes and then stays is flat there,
// though the halves of all the runs call it not flat; memory that still
// grows past the windows is not; the heap's samples are placed by the
// runs they followed.
func TestSteadyFlat(t *testing.T) {
	const runs = 100
	ends := make([]time.Duration, runs)
	rss := make([]int64, runs)
	for i := range runs {
		ends[i] = time.Duration(i) * 2500 * time.Millisecond // run i+1 ends 2.5 s after run i
		// Fills for 60 runs (150 s), then moves within 5 %.
		rss[i] = int64(240+6*min(i, 60)+(i%3)*15) << 10
	}
	if rssFlat(rss) {
		t.Fatalf("the halves of filling memory must not be flat: the case does not test the steady verdict")
	}
	var heap []int64
	var heapRuns []int
	for n := 1; n <= runs; n++ {
		if n == 1 || n%heapEvery == 0 {
			heap, heapRuns = append(heap, int64(80+3*min(n, 60))<<10), append(heapRuns, n)
		}
	}
	row := &FleetRow{Hosts: 1000, Walls: make([]time.Duration, runs), ServerRSSKiB: rss, RunEnds: ends, ServerHeapKiB: heap, HeapRuns: heapRuns}
	line := row.MemoryLine()
	// Runs 61..100 ended 150 s or more after the first.
	for _, want := range []string{" server_rss_flat=false ", " steady_runs=40 ", " server_rss_steady_flat=true ", " server_heap_mb_first=83 ", " server_heap_mb_last=260 ", "server_heap_mb_steady_max_first_half=260 server_heap_mb_steady_max_second_half=260 server_heap_mb_steady_per_run=0.00 server_heap_flat=true"} {
		if !strings.Contains(line+" ", want) {
			t.Errorf("MemoryLine() = %q, want it to hold %q", line, want)
		}
	}
	// Still growing past the windows: 3 MiB a run.
	for i := range rss {
		rss[i] = int64(240+3*i) << 10
	}
	for i, n := range heapRuns {
		heap[i] = int64(80+3*n) << 10
	}
	line = row.MemoryLine()
	for _, want := range []string{" server_rss_steady_flat=false ", " server_heap_mb_steady_per_run=3.00 ", " server_heap_flat=false"} {
		if !strings.Contains(line+" ", want) {
			t.Errorf("growing: MemoryLine() = %q, want it to hold %q", line, want)
		}
	}
	// Too few runs past the windows: unknown.
	row.RunEnds = ends[:10]
	if line = row.MemoryLine(); !strings.Contains(line, "steady_runs=0 ") || !strings.HasSuffix(line, "server_heap_flat=unknown") {
		t.Errorf("10 runs: MemoryLine() = %q, want no steady sample", line)
	}
}

// TestParseHeapAlloc reads the live heap from a heap profile in text.
func TestParseHeapAlloc(t *testing.T) {
	prof := "heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 1\n# TotalAlloc = 2\n# HeapAlloc = 3145728\n# HeapSys = 9\n"
	if got, err := parseHeapAlloc([]byte(prof)); err != nil || got != 3072 {
		t.Errorf("parseHeapAlloc = %d, %v; want 3072 KiB", got, err)
	}
	if _, err := parseHeapAlloc([]byte("# Alloc = 1\n")); err == nil {
		t.Error("a profile without HeapAlloc: want an error")
	}
}

// TestCheckFleetReport: a fleet run's report is checked whole under the
// output the harness keeps (maxOutput) and by its head at it (a
// 10,000-host report is past it), where a failed run is still caught.
func TestCheckFleetReport(t *testing.T) {
	// report is an indented fan-out report of hosts child runs, with a
	// message of pad bytes, cut at cut bytes (0: not cut).
	report := func(status string, hosts, pad, cut int) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, "{\n  \"run_id\": \"r\",\n  \"status\": %q,\n  \"post_message\": \"%s\",\n  \"resources\": [", status, strings.Repeat("x", pad))
		for i := range hosts {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "\n    {\"ref\": \"apply#host-%05d\", \"status\": \"stable\"}", i)
		}
		b.WriteString("\n  ]\n}\n")
		if cut > 0 {
			return b.Bytes()[:cut]
		}
		return b.Bytes()
	}
	for _, c := range []struct {
		name  string
		out   []byte
		whole bool
		fails bool
	}{
		{"every host", report("succeeded", 3, 0, 0), true, false},
		{"a host short", report("succeeded", 2, 0, 0), true, true},
		{"failed", report("failed", 3, 0, 0), true, true},
		{"empty", nil, true, true},
		{"one byte under the limit", report("succeeded", 3, maxOutput-300, maxOutput-1), true, true},
		{"at the limit", report("succeeded", 3, maxOutput, maxOutput), false, false},
		{"at the limit, failed", report("failed", 3, maxOutput, maxOutput), false, true},
	} {
		whole, err := checkFleetReport(c.out, "r", 3)
		if whole != c.whole || (err != nil) != c.fails {
			t.Errorf("%s (%d bytes): whole %v, error %v; want whole %v, failing %v", c.name, len(c.out), whole, err, c.whole, c.fails)
		}
	}
}

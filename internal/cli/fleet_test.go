package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/converge"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/internal/facts"
	"github.com/manifold-run/manifold/worker"
)

// fleetFacts are a worker's facts in the shape gathered facts have.
func fleetFacts(host, family, role, root string) map[string]any {
	return map[string]any{"host": map[string]any{"info": map[string]any{"hostname": host, "platformFamily": family,
		"platformVersion": "12"}}, "role": role, "root": root, "disks": []any{"vda", "vdb"}}
}

// TestFleet: three in-process workers with their own facts and pools
// against a real server and coordinator; w1 and w2 keep assignment site
// converged (w1 after repairing a hand edit), w3 fails assignment broken.
// manifold fleet shows each host's pools, facts, worst state, drift
// repairs and last run, in text and JSON, and filters by --pool, --state
// and --where; a filter matching nothing is exit 0; a bad --where is exit 2.
func TestFleet(t *testing.T) {
	t.Parallel()
	srv, b := bustest.Start(t, bus.Config{})
	c, err := coordinator.New(coordinator.Config{Bus: b, Name: "c1"})
	require.NoError(t, err)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(c.Stop)
	roots := map[string]string{}
	for _, w := range []struct {
		name, family, role string
		pools              []string
	}{
		{"w2", "debian", "web", []string{"web", "batch"}},
		{"w3", "rhel", "db", []string{"db"}},
		{"w1", "debian", "web", []string{"web"}},
	} {
		root := t.TempDir()
		roots[w.name] = root
		wk, err := worker.New(worker.Config{Bus: b, Registry: workerRegistry(b), Name: w.name, Pools: w.pools,
			Facts: fleetFacts("host-"+w.name, w.family, w.role, root), DebtDir: t.TempDir(), StateDir: t.TempDir()})
		require.NoError(t, err)
		require.NoError(t, wk.Start(t.Context()))
		t.Cleanup(wk.Kill)
	}
	// w3's broken assignment writes under a regular file: it fails.
	require.NoError(t, os.WriteFile(filepath.Join(roots["w3"], "notadir"), nil, 0o644))

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"site.yaml": `
data: {root: "{{ lookup('facts.root') }}"}
resources:
  - {type: file, name: "{{ data.root }}/motd", content: "hello\n"}
`,
		"broken.yaml": `
data: {root: "{{ lookup('facts.root') }}"}
resources:
  - {type: file, name: "{{ data.root }}/notadir/motd", content: "hello\n"}
`})
	url := srv.ClientURL()
	r := run(t, "assign", "--server", url, "--pool", "web", "--where", "facts.role == 'web'", "--interval", "1h", "site", filepath.Join(dir, "site.yaml"))
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = run(t, "assign", "--server", url, "--pool", "db", "--interval", "1h", "broken", filepath.Join(dir, "broken.yaml"))
	require.Equal(t, ExitOK, r.code, r.stderr)

	waitEntry := func(name string, ok func(worker.Registration) bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		_, err := b.Workers().WaitFor(ctx, name, func(data []byte) bool {
			var reg worker.Registration
			return json.Unmarshal(data, &reg) == nil && ok(reg)
		})
		require.NoError(t, err, "waiting for worker %s", name)
	}
	converged := func(reg worker.Registration) bool {
		return reg.Assignments["site"].State == "converged" && reg.Fleet != nil && reg.Fleet.LastRun != nil
	}
	waitEntry("w1", converged)
	waitEntry("w2", converged)
	waitEntry("w3", func(reg worker.Registration) bool {
		return reg.Assignments["broken"].State == "failed" && reg.Fleet != nil && reg.Fleet.LastRun != nil
	})
	// A hand edit on w1: its watch repairs it, a drift repair counted.
	require.NoError(t, os.WriteFile(filepath.Join(roots["w1"], "motd"), []byte("edited\n"), 0o644))
	waitEntry("w1", func(reg worker.Registration) bool {
		return reg.Fleet != nil && reg.Fleet.Drifts["site"].Count == 1 && reg.Assignments["site"].State == "converged"
	})

	// w1's repair may bring one more drift check (stable, but w1 shows
	// repairing while it runs): what depends on w1's state is polled
	// until it holds, with a deadline.
	until := func(t *testing.T, f func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			ok, got := f()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not within 30s; last: %s", got)
			}
			<-tick.C
		}
	}

	fleet := func(args ...string) ([]FleetHost, result) {
		t.Helper()
		r := run(t, append([]string{"fleet", "--server", url, "--output", "json"}, args...)...)
		require.Equal(t, ExitOK, r.code, "%v: %s", args, r.stderr)
		var hosts []FleetHost
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &hosts), r.stdout)
		return hosts, r
	}
	names := func(hosts []FleetHost) []string {
		out := []string{}
		for _, h := range hosts {
			out = append(out, h.Name)
		}
		return out
	}

	t.Run("json", func(t *testing.T) {
		var hosts []FleetHost
		until(t, func() (bool, string) {
			var r result
			hosts, r = fleet()
			return len(hosts) == 3 && hosts[0].State == "converged" && hosts[0].Drifts == 1 &&
				hosts[1].State == "converged" && hosts[2].State == "failed", r.stdout
		})
		require.Equal(t, []string{"w1", "w2", "w3"}, names(hosts), "sorted by name")
		w1, w2, w3 := hosts[0], hosts[1], hosts[2]
		require.Equal(t, []string{"web", "batch"}, w2.Pools)
		require.Equal(t, map[string]any{"hostname": "host-w1", "os": "debian"}, w1.Facts)
		require.Equal(t, map[string]any{"hostname": "host-w3", "os": "rhel"}, w3.Facts)

		require.Equal(t, "converged", w1.State)
		require.Equal(t, 1, w1.Drifts)
		require.NotNil(t, w1.DriftsSince)
		require.Equal(t, 1, w1.Assignments["site"].Drifts)
		require.Equal(t, "succeeded", w1.LastRun.Status)
		require.Equal(t, "site", w1.LastRun.Assignment)
		require.Equal(t, "drift", w1.LastRun.Trigger)
		require.Equal(t, "converged", w2.State)
		require.Zero(t, w2.Drifts)

		require.Equal(t, "failed", w3.State)
		require.Equal(t, "failed", w3.Assignments["broken"].State)
		require.Equal(t, "failed", w3.LastRun.Status)
		require.Equal(t, "broken", w3.LastRun.Assignment)
		require.NotEmpty(t, w3.LastRun.RunID)
		// The run ID is the convergence run's: status knows it.
		rs := run(t, "status", "--server", url, w3.LastRun.RunID)
		require.Equal(t, ExitOK, rs.code, rs.stderr)
		require.Contains(t, rs.stdout, "failed")
	})

	t.Run("text", func(t *testing.T) {
		want := []*regexp.Regexp{
			regexp.MustCompile(`^NAME +POOLS +HOSTNAME +OS +STATE +DRIFTS +SINCE +LAST RUN +RUN STATUS +RUN AT$`),
			regexp.MustCompile(`^w1 +web +host-w1 +debian +converged +1 +\d+s ago +\S+ +succeeded +\d+s ago$`),
			regexp.MustCompile(`^w2 +web,batch +host-w2 +debian +converged +0 +\d+s ago +\S+ +succeeded +\d+s ago$`),
			regexp.MustCompile(`^w3 +db +host-w3 +rhel +failed +0 +\d+s ago +\S+ +failed +\d+s ago$`),
		}
		var lines []string
		until(t, func() (bool, string) {
			r := run(t, "fleet", "--server", url)
			require.Equal(t, ExitOK, r.code, r.stderr)
			lines = strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
			if len(lines) != len(want) {
				return false, r.stdout
			}
			for i, re := range want {
				if !re.MatchString(lines[i]) {
					return false, r.stdout
				}
			}
			return true, ""
		})
		// Aligned: every column starts where its header does.
		for _, col := range []string{"POOLS", "HOSTNAME", "OS", "STATE", "DRIFTS", "LAST RUN"} {
			at := strings.Index(lines[0], "  "+col+" ") + 2 // columns are 2 spaces apart at least
			require.Greater(t, at, 1, col)
			for _, l := range lines[1:] {
				require.NotEqual(t, byte(' '), l[at], "column %s in %q", col, l)
				require.Equal(t, byte(' '), l[at-1], "column %s in %q", col, l)
			}
		}
	})

	t.Run("filters", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want []string
		}{
			{[]string{"--pool", "web"}, []string{"w1", "w2"}},
			{[]string{"--pool", "db,batch"}, []string{"w2", "w3"}},
			{[]string{"--state", "failed"}, []string{"w3"}},
			{[]string{"--state", "converged"}, []string{"w1", "w2"}},
			{[]string{"--state", "none,failed"}, []string{"w3"}},
			{[]string{"--where", "facts.role == 'db'"}, []string{"w3"}},
			{[]string{"--where", "{{ facts.host.info.platformFamily == 'debian' }}"}, []string{"w1", "w2"}},
			{[]string{"--where", "'vdb' in facts.disks", "--pool", "batch"}, []string{"w2"}},
			{[]string{"--pool", "web", "--where", "facts.role == 'db'"}, []string{}},
			{[]string{"--where", "facts.nosuch == 'x'"}, []string{}},
		} {
			until(t, func() (bool, string) {
				hosts, _ := fleet(tc.args...)
				return slices.Equal(tc.want, names(hosts)), fmt.Sprintf("%v: %v", tc.args, names(hosts))
			})
		}
		// Matching nothing: [] in json, no lines and a note in text, exit 0.
		r := run(t, "fleet", "--server", url, "--output", "json", "--state", "flapping")
		require.Equal(t, ExitOK, r.code, r.stderr)
		require.Equal(t, "[]\n", r.stdout)
		r = run(t, "fleet", "--server", url, "--state", "flapping")
		require.Equal(t, ExitOK, r.code, r.stderr)
		require.Empty(t, r.stdout)
		require.Contains(t, r.stderr, "no host matches (of 3 live)")
	})

	t.Run("facts", func(t *testing.T) {
		hosts, _ := fleet("--facts", "role,ver=host.info.platformVersion,disk=disks.1,nosuch.fact")
		require.Equal(t, map[string]any{"role": "db", "ver": "12", "disk": "vdb", "nosuch.fact": nil}, hosts[2].Facts)
		hosts, _ = fleet("--facts", "role", "--where", "facts.role == 'web'")
		require.Equal(t, map[string]any{"role": "web"}, hosts[0].Facts, "facts from the where's decoding too")
		r := run(t, "fleet", "--server", url, "--facts", "role,disks", "--pool", "db")
		require.Equal(t, ExitOK, r.code, r.stderr)
		require.Regexp(t, `(?m)^NAME +POOLS +ROLE +DISKS +STATE`, r.stdout)
		require.Regexp(t, `(?m)^w3 +db +db +\["vda","vdb"\] +failed`, r.stdout)
		r = run(t, "fleet", "--server", url, "--facts", "", "--pool", "db")
		require.Regexp(t, `(?m)^NAME +POOLS +STATE`, r.stdout)
	})

	t.Run("unreadable entry", func(t *testing.T) {
		_, err := b.Workers().Put(t.Context(), "zz-broken", []byte(`{"name": "zz-broken", "pools": "web"}`))
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.Workers().Delete(context.Background(), "zz-broken") })
		hosts, r := fleet()
		require.Equal(t, []string{"w1", "w2", "w3"}, names(hosts))
		require.Contains(t, r.stderr, "manifold fleet: zz-broken: unreadable entry: \"pools\": json: cannot unmarshal string")
		require.Contains(t, r.stderr, "(left out)")
	})

	t.Run("bad where", func(t *testing.T) {
		r := run(t, "fleet", "--server", url, "--where", "facts.role ==")
		require.Equal(t, ExitInvalid, r.code, r.stdout)
		require.Contains(t, r.stderr, `manifold fleet: --where "facts.role ==": `)
		require.Contains(t, r.stderr, "unexpected token EOF")
		require.Empty(t, r.stdout)
		// Compiles but gives no bool on any host: exit 2 naming a host.
		r = run(t, "fleet", "--server", url, "--where", "facts.role")
		require.Equal(t, ExitInvalid, r.code, r.stdout)
		require.Contains(t, r.stderr, `--where "facts.role" failed on 3 of 3 hosts, left out (first: host w`)
		require.Contains(t, r.stderr, "want a bool")
	})
}

// TestFleetFlags: flags are checked before anything is connected to.
func TestFleetFlags(t *testing.T) {
	t.Parallel()
	noServer := []string{"--server", "nats://127.0.0.1:1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--where", "nosuch(1)"}, `--where "nosuch(1)": template: expression "nosuch(1)": unknown name nosuch`},
		{[]string{"--where", "{{ facts.x == 1"}, `--where "{{ facts.x == 1"`},
		{[]string{"--state", "broken"}, `--state "broken": want one of none, converged, repairing, drifted, flapping, failed`},
		{[]string{"--facts", "a..b"}, `--facts "a..b": want PATH or LABEL=PATH`},
		{[]string{"--facts", "a b=c"}, `label "a b"`},
		{[]string{"--facts", "x=a,x=b"}, `label "x" given twice`},
		{[]string{"--output", "yaml"}, `want one of text, json`},
		{[]string{"extra"}, `want no arguments, got 1`},
	} {
		r := run(t, append(append([]string{"fleet"}, noServer...), tc.args...)...)
		require.Equal(t, ExitInvalid, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
	r := run(t, append([]string{"fleet"}, noServer...)...)
	require.Equal(t, ExitUnavailable, r.code, r.stderr)

	r = run(t, "fleet", "--help")
	require.Equal(t, ExitOK, r.code)
	for _, s := range []string{"Usage: manifold fleet", "--where EXPR", "failed >", "docs/fleet-view.md", "-state", "-facts", "Exit 0"} {
		require.Contains(t, r.stdout, s)
	}
}

// TestFleetFactsLimit: --facts takes at most maxFleetFacts facts.
func TestFleetFactsLimit(t *testing.T) {
	t.Parallel()
	list := func(n int) string {
		var l []string
		for i := range n {
			l = append(l, fmt.Sprintf("f%d", i))
		}
		return strings.Join(l, ",")
	}
	cols, err := parseFactColumns(list(maxFleetFacts))
	require.NoError(t, err)
	require.Len(t, cols, maxFleetFacts)
	_, err = parseFactColumns(list(maxFleetFacts + 1))
	require.EqualError(t, err, fmt.Sprintf("--facts: %d facts, at most %d", maxFleetFacts+1, maxFleetFacts))
}

// TestFleetHostState: a host's state is the worst of its assignments'
// (failed > flapping > drifted > repairing > converged), none without;
// drifts add up from the earliest since.
func TestFleetHostState(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		states []string
		want   string
	}{
		{nil, "none"},
		{[]string{"converged"}, "converged"},
		{[]string{"converged", "repairing"}, "repairing"},
		{[]string{"drifted", "repairing", "converged"}, "drifted"},
		{[]string{"drifted", "flapping"}, "flapping"},
		{[]string{"flapping", "failed", "converged"}, "failed"},
		{[]string{"converged", "someday"}, "someday"}, // a newer worker's state: shown, ranked as repairing
		{[]string{"someday", "drifted"}, "drifted"},
	} {
		reg := worker.Registration{Name: "h", Assignments: map[string]worker.AssignmentStatus{},
			Fleet: &worker.FleetStatus{Drifts: map[string]worker.Drifts{}}}
		for i, s := range tc.states {
			name := fmt.Sprintf("a%d", i)
			reg.Assignments[name] = worker.AssignmentStatus{State: converge.State(s), Version: 1}
			reg.Fleet.Drifts[name] = worker.Drifts{Count: i + 1, Since: t0.Add(time.Duration(-i) * time.Hour)}
		}
		data, err := json.Marshal(reg)
		require.NoError(t, err)
		var tried int
		h, ok, err := fleetHostOf(data, fleetFilter{}, defaultFleetFacts, &tried)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, tc.want, h.State, "%v", tc.states)
		n := len(tc.states)
		require.Equal(t, n*(n+1)/2, h.Drifts)
		if n > 0 {
			require.Equal(t, t0.Add(time.Duration(-(n-1))*time.Hour), *h.DriftsSince)
		} else {
			require.Nil(t, h.DriftsSince)
		}
		require.Equal(t, map[string]any{"hostname": nil, "os": nil}, h.Facts)
	}
}

// TestRawFact: the partial decoding finds what facts.Query finds.
func TestRawFact(t *testing.T) {
	t.Parallel()
	f := map[string]any{"host": map[string]any{"info": map[string]any{"hostname": "h1", "procs": 12.0}},
		"disks": []any{"vda", map[string]any{"name": "vdb"}}, "flag": true}
	raw, err := json.Marshal(f)
	require.NoError(t, err)
	for path, want := range map[string]any{
		"host.info.hostname": "h1", "host.info.procs": 12.0, "disks.0": "vda", "disks.1.name": "vdb", "flag": true,
		"disks": []any{"vda", map[string]any{"name": "vdb"}}, "host.info.nosuch": nil, "disks.2": nil, "disks.x": nil,
		"flag.x": nil, "nosuch": nil,
	} {
		require.Equal(t, want, rawFact(raw, path), path)
	}
	require.Nil(t, rawFact(nil, "host"))
	// Strings holding brackets, quotes and escapes; escaped keys; spaces.
	tricky := []byte(` { "a" : "x}]\\\"{[" , "b\u0020c": [ 1 , {"d": "]"} , "e,f" ] ,"n":-1.5e3,"t" : true, "z": null } `)
	require.True(t, json.Valid(tricky))
	for path, want := range map[string]any{
		"a": `x}]\"{[`, "b c": []any{1.0, map[string]any{"d": "]"}, "e,f"}, "b c.1.d": "]", "b c.2": "e,f",
		"n": -1500.0, "t": true, "z": nil, "b c.3": nil, "a.x": nil,
	} {
		require.Equal(t, want, rawFact(tricky, path), path)
	}
	// The same answers as decoding everything, on this host's real facts.
	sys := facts.System(t.Context())
	raw, err = json.Marshal(sys)
	require.NoError(t, err)
	for _, path := range []string{"host.info.hostname", "host.info.platformFamily", "cpu.info.0.modelName", "network.interfaces.0",
		"memory.virtual.total", "partition.partitions", "host", "nosuch", "cpu.info.999"} {
		want, _ := facts.Query(sys, path)
		var norm any // through JSON, as a worker's entry carries it
		data, _ := json.Marshal(want)
		require.NoError(t, json.Unmarshal(data, &norm))
		require.Equal(t, norm, rawFact(raw, path), path)
	}
	require.Equal(t, "-", factCell(nil))
	require.Equal(t, "a b", factCell("a\tb\n"))
	require.Equal(t, strings.Repeat("x", maxFactWidth-1)+"…", factCell(strings.Repeat("x", 100)))
}

// BenchmarkFleet10000 is `manifold fleet` at 10,000 hosts, each entry
// carrying this host's gathered facts (4–5 KB), two assignments and fleet
// notes: one scan of the workers bucket and the rows built, without and
// with a --where (which decodes every host's facts).
func BenchmarkFleet10000(b *testing.B) {
	_, bb := bustest.Start(b, bus.Config{WorkerTTL: time.Hour})
	ctx := context.Background()
	sys := facts.System(ctx)
	now := time.Now().UTC()
	var g errgroup.Group
	g.SetLimit(16)
	size := 0
	for i := range 10_000 {
		name := fmt.Sprintf("host%05d", i)
		reg := worker.Registration{Name: name, Pools: []string{"web"}, Concurrency: 2, Running: []string{}, Facts: sys,
			Started: now, Seen: now, Assignments: map[string]worker.AssignmentStatus{
				"site": {Version: 3, State: converge.StateConverged, Since: now},
				"ntp":  {Version: 1, State: converge.StateRepairing, Since: now}},
			Fleet: &worker.FleetStatus{LastRun: &worker.LastRun{RunID: "20261125T143203Z-bea59177b5", Status: "succeeded", Time: now},
				Drifts: map[string]worker.Drifts{"site": {Count: i % 3, Since: now}}}}
		data, err := json.Marshal(reg)
		require.NoError(b, err)
		size = len(data)
		g.Go(func() error { _, err := bb.Workers().Put(ctx, name, data); return err })
	}
	require.NoError(b, g.Wait())
	b.Logf("10,000 entries of %d bytes", size)
	for _, bc := range []struct {
		name   string
		filter fleetFilter
		want   int
	}{
		{"all", fleetFilter{}, 10_000},
		{"where", fleetFilter{where: "facts.host.info.os == 'linux'"}, 10_000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			start := cpuTime()
			defer func() { b.ReportMetric(float64((cpuTime()-start).Milliseconds())/float64(b.N), "cpu-ms/op") }()
			for b.Loop() {
				res, err := scanFleet(ctx, bb, bc.filter, defaultFleetFacts)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Hosts) != bc.want {
					b.Fatalf("%d hosts, want %d", len(res.Hosts), bc.want)
				}
			}
		})
	}
}

// cpuTime is the process's CPU time (user+system, the embedded server's
// included): on a loaded machine it varies less than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestDecodeFleetEntry: an entry is decoded but its facts, kept raw; a
// malformed entry is an error naming what is wrong.
func TestDecodeFleetEntry(t *testing.T) {
	t.Parallel()
	e, err := decodeFleetEntry([]byte(`{"name":"w1","pools":["a","b"],"facts":{"x":{"y":[1,"}"]}},"extra":{"z":"{"},` +
		`"seen":"2026-11-25T14:00:00Z","assignments":{"s":{"version":2,"state":"failed"}},"fleet":{"last_run":{"run_id":"r1"}}}`))
	require.NoError(t, err)
	require.Equal(t, "w1", e.Name)
	require.Equal(t, []string{"a", "b"}, e.Pools)
	require.Equal(t, `{"x":{"y":[1,"}"]}}`, string(e.Facts))
	require.Equal(t, "}", rawFact(e.Facts, "x.y.1"))
	require.Equal(t, converge.StateFailed, e.Assignments["s"].State)
	require.Equal(t, "r1", e.Fleet.LastRun.RunID)
	require.Equal(t, time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC), e.Seen)
	for in, want := range map[string]string{
		`not json`:                 "not a JSON object",
		`[]`:                       "not a JSON object",
		`{"name":"w1","facts":{`:   "not a JSON object",
		`{"name":"w1" "pools":[]}`: "not a JSON object",
		`{"pools":[]}`:             "no name",
		`{"name":1}`:               `"name": json: cannot unmarshal number`,
		`{"name":"w","seen":"x"}`:  `"seen": parsing time`,
	} {
		_, err := decodeFleetEntry([]byte(in))
		require.ErrorContains(t, err, want, in)
	}
}

// TestFleetAsSubmitter: with the credentials `manifold server` generates,
// the client (submitter) role may read the fleet: the scan uses only what
// listing the workers' keys needs (a scan through a pull consumer was
// refused: $JS.API.CONSUMER.MSG.NEXT and .INFO of KV_manifold-workers).
func TestFleetAsSubmitter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	env := envOf(map[string]string{credentialsEnv: creds, "XDG_CONFIG_HOME": filepath.Join(dir, "config")})
	url := startCommand(t, env, "server", "--listen", "127.0.0.1:0", "--store-dir", filepath.Join(dir, "js")).waitFor(t, listeningRE)
	env = envOf(map[string]string{credentialsEnv: creds, "MANIFOLD_SERVER": url})
	startCommand(t, env, "coordinator", "--name", "c1").waitFor(t, regexp.MustCompile(`(coordinator started)`))
	startCommand(t, env, "worker", "--name", "w1", "--pool", "web", "--cache-dir", filepath.Join(dir, "cache"),
		"--state-dir", filepath.Join(dir, "state"), "--debt-dir", filepath.Join(dir, "debt"), "--fact", "role=web").
		waitFor(t, regexp.MustCompile(`(worker started)`))

	var out, errOut syncBuffer
	start := time.Now()
	code := Run(t.Context(), IO{Stdout: &out, Stderr: &errOut, Getenv: env}, []string{"fleet", "--output", "json", "--facts", "role"})
	require.Equal(t, ExitOK, code, "%s%s", out.String(), errOut.String())
	require.Less(t, time.Since(start), 10*time.Second)
	var hosts []FleetHost
	require.NoError(t, json.Unmarshal([]byte(out.String()), &hosts), out.String())
	require.Len(t, hosts, 1)
	require.Equal(t, "w1", hosts[0].Name)
	require.Equal(t, []string{"web"}, hosts[0].Pools)
	require.Equal(t, map[string]any{"role": "web"}, hosts[0].Facts)
	require.Equal(t, "none", hosts[0].State)
	require.NotContains(t, errOut.String(), "ermissions")
}

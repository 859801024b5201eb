package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// FleetResult is the figures of mode fleet: one row per fleet size.
type FleetResult struct {
	// Resources is the number of file resources of the fleet manifest;
	// Runs the consecutive fleet runs per size.
	Resources, Runs int
	// PerProcess is how many simulated hosts a host process holds.
	PerProcess int
	// LiveRuns is the coordinator's --max-tree-live-runs (0: its default).
	LiveRuns int
	// MaxConsumers is the server's default_max_consumers (0: its
	// default).
	MaxConsumers int
	// Executor is how the hosts apply files.
	Executor string
	// Pulls is how the hosts take the pool's tasks (Config.FleetPulls).
	Pulls string
	// Idle is the window idle hosts were measured over.
	Idle time.Duration
	Rows []*FleetRow
}

// FleetRow is the figures of one fleet size.
type FleetRow struct {
	// Hosts is the number of simulated hosts, Processes the host processes
	// holding them.
	Hosts, Processes int
	// Start is how long the hosts took to connect, attach and register.
	Start time.Duration
	// Walls are the wall times of the `manifold run --each-worker` client
	// processes (submit, wait, print the report), one per run; RunTimes
	// the reports' finished_at - started_at.
	Walls, RunTimes []time.Duration
	// ServerRSSKiB and CoordRSSKiB are the server's and the coordinator's
	// resident memory (VmRSS) after each run.
	ServerRSSKiB, CoordRSSKiB []int64
	// ServerPeakKiB is the server's peak resident memory (VmHWM) after the
	// last run.
	ServerPeakKiB int64
	// RunEnds is when each run ended, from the start of the first.
	RunEnds []time.Duration
	// ServerHeapKiB is the server's live heap (HeapAlloc after two
	// forced collections: the second drops the buffers its pools kept
	// through the first), heapQuiet after the runs HeapRuns names (1 =
	// the first): the first, every heapEvery-th and the last.
	ServerHeapKiB []int64
	HeapRuns      []int
	// CoordCPU is the coordinator's CPU time (user + system) over each
	// run; ServerCPU the server's, HostsCPU the host processes'.
	CoordCPU, ServerCPU, HostsCPU []time.Duration
	// ReportWalls are the times `manifold status --output json` took to
	// print each run's whole report; ReportErr is its first failure.
	ReportWalls []time.Duration
	ReportErr   error
	// IdleServerCPU and IdleHostsCPU are the CPU time the server and the
	// host processes used over Config.FleetIdle with every host registered and
	// no run: the cost of idle hosts (fetches, heartbeats).
	IdleServerCPU, IdleHostsCPU time.Duration
	// Load is /proc/loadavg after the last run.
	Load string
	Err  error
}

// wall is the median wall time of the runs.
func (r *FleetRow) wall() time.Duration { return median(r.Walls) }

// coordCPUPerHost is the median coordinator CPU time of a run, per host.
func (r *FleetRow) coordCPUPerHost() time.Duration {
	if r.Hosts == 0 {
		return 0
	}
	return median(r.CoordCPU) / time.Duration(r.Hosts)
}

// last returns the last element of s, 0 for none.
func last[T any](s []T) T {
	var zero T
	if len(s) == 0 {
		return zero
	}
	return s[len(s)-1]
}

// Line is the one-line summary of the size: the median wall time, the
// server's RSS after the last run and the coordinator's median CPU time
// per host.
func (r *FleetRow) Line(resources int) string {
	return fmt.Sprintf("fleet hosts=%d resources=%d wall=%.2fs server_rss_mb=%.0f coordinator_cpu_ms_per_host=%.3f",
		r.Hosts, resources, r.wall().Seconds(), float64(last(r.ServerRSSKiB))/1024,
		float64(r.coordCPUPerHost())/float64(time.Millisecond))
}

// MemoryLine is the memory-flatness summary of the size: the server's and
// the coordinator's RSS after the first and the last run, and the
// server's highest RSS after a run of the first and of the second half of
// the runs (server_rss_flat: the second half's stays within
// rssFlatMargin of the first half's; with fewer than 4 runs, unknown).
// Then the same over the steady state only, the runs that ended
// fleetWarmup or more after the first (steady_runs of them): RSS
// (server_rss_steady_flat) and the server's live heap
// (server_heap_flat), each unknown with fewer than 4 samples.
func (r *FleetRow) MemoryLine() string {
	first := func(s []int64) float64 {
		if len(s) == 0 {
			return 0
		}
		return float64(s[0]) / 1024
	}
	h1, h2 := halvesMax(r.ServerRSSKiB)
	flat := "unknown"
	if len(r.ServerRSSKiB) >= 4 {
		flat = strconv.FormatBool(rssFlat(r.ServerRSSKiB))
	}
	rssSteady := steady(r.ServerRSSKiB, r.RunEnds, nil)
	heapSteady := steady(r.ServerHeapKiB, r.RunEnds, r.HeapRuns)
	s1, s2 := halvesMax(rssSteady)
	hp1, hp2 := halvesMax(heapSteady)
	return fmt.Sprintf("fleet hosts=%d runs=%d server_rss_mb_first=%.0f server_rss_mb_last=%.0f coordinator_rss_mb_first=%.0f coordinator_rss_mb_last=%.0f server_rss_mb_max_first_half=%.0f server_rss_mb_max_second_half=%.0f server_rss_flat=%s"+
		" steady_runs=%d server_rss_mb_steady_max_first_half=%.0f server_rss_mb_steady_max_second_half=%.0f server_rss_steady_flat=%s"+
		" server_heap_mb_first=%.0f server_heap_mb_last=%.0f server_heap_mb_steady_max_first_half=%.0f server_heap_mb_steady_max_second_half=%.0f server_heap_mb_steady_per_run=%.2f server_heap_flat=%s",
		r.Hosts, len(r.Walls), first(r.ServerRSSKiB), float64(last(r.ServerRSSKiB))/1024, first(r.CoordRSSKiB), float64(last(r.CoordRSSKiB))/1024,
		float64(h1)/1024, float64(h2)/1024, flat,
		len(rssSteady), float64(s1)/1024, float64(s2)/1024, flatOf(rssSteady),
		first(r.ServerHeapKiB), float64(last(r.ServerHeapKiB))/1024, float64(hp1)/1024, float64(hp2)/1024, r.heapSlope()/1024, flatOf(heapSteady))
}

// fleetWarmup is how long after the first run the server's memory may
// still rise with nothing leaking: what it holds for a time, not for a
// number of runs, fills up over the longest such window: the streams'
// duplicate windows (2 minutes: every message ID published in them) and
// the events a fan-out keeps after its end (FoldEventsGrace). Runs 2.5 s
// apart fill them for 60 runs: the halves of 100 runs compare the
// filling with the full, which a leak and a window tell apart only past
// the window.
const fleetWarmup = 2*time.Minute + coordinator.DefaultFoldEventsGrace

// heapEvery is how often (in runs) the server's live heap is sampled
// besides after the first and the last run: each sample waits heapQuiet
// after the run's figures, then takes two collections of the server's
// heap.
const heapEvery = 10

// heapQuiet is how long the server is left alone before its heap is
// sampled: past the file store's cache expiry (10 s), the message blocks
// the run wrote or read (purges, the report fetch) no longer hold their
// buffers (4 or 8 MB a block; 40-90 MB of a 1,000-host run's heap right
// after it), so the sample is what the server keeps, not what it was
// doing.
const heapQuiet = 11 * time.Second

// steady returns the samples taken fleetWarmup or more after the end of
// the first run: s[i] was taken after run runs[i] (1 = the first), or
// after run i+1 when runs is nil; ends are the runs' ends.
func steady(s []int64, ends []time.Duration, runs []int) []int64 {
	if len(ends) == 0 {
		return nil
	}
	var out []int64
	for i, v := range s {
		n := i + 1
		if runs != nil {
			n = runs[i]
		}
		if n-1 < len(ends) && ends[n-1]-ends[0] >= fleetWarmup {
			out = append(out, v)
		}
	}
	return out
}

// heapSlope is the least-squares slope, in KiB a run, of the server's
// live heap over the steady runs' samples (0 with fewer than 2): what a
// run leaves behind, which the halves' verdict sees only past its
// margin.
func (r *FleetRow) heapSlope() float64 {
	var xs, ys []float64
	for i, v := range r.ServerHeapKiB {
		if n := r.HeapRuns[i]; n-1 < len(r.RunEnds) && r.RunEnds[n-1]-r.RunEnds[0] >= fleetWarmup {
			xs, ys = append(xs, float64(n)), append(ys, float64(v))
		}
	}
	if len(xs) < 2 {
		return 0
	}
	var mx, my float64
	for i := range xs {
		mx, my = mx+xs[i], my+ys[i]
	}
	mx, my = mx/float64(len(xs)), my/float64(len(xs))
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	return num / den
}

// flatOf is rssFlat's verdict on s, unknown below 4 samples.
func flatOf(s []int64) string {
	if len(s) < 4 {
		return "unknown"
	}
	return strconv.FormatBool(rssFlat(s))
}

// rssFlatMargin is how much higher than in the first half of the runs
// the server's RSS may be in the second half for memory to count as
// flat: the file store's block buffers and the collector's headroom move
// it by tens of MB from one run to the next whatever is kept.
const rssFlatMargin = 0.10

// halvesMax returns the highest of the first half of s and of the second
// (the middle one, of an odd count, in the first).
func halvesMax(s []int64) (first, second int64) {
	mid := (len(s) + 1) / 2
	for i, v := range s {
		if i < mid {
			first = max(first, v)
		} else {
			second = max(second, v)
		}
	}
	return first, second
}

// rssFlat reports whether RSS samples after consecutive runs are flat:
// the second half's highest within rssFlatMargin of the first half's.
// Memory that grows with every run fails it once the runs are several
// times what the first run's RSS can absorb.
func rssFlat(s []int64) bool {
	first, second := halvesMax(s)
	return float64(second) <= float64(first)*(1+rssFlatMargin)
}

// defaultIdleWindow is how long idle hosts are measured before the first
// run, unless Config.FleetIdle says otherwise.
const defaultIdleWindow = 5 * time.Second

// fleetPool is the pool every simulated host takes.
const fleetPool = "fleet"

// fleetDir is the directory, under each host's root, holding the fleet
// manifest's files; the manifest names them /manifold-fleet/fNN.conf.
const fleetDir = "manifold-fleet"

// hostName is the name of the i-th simulated host (from 1).
func hostName(i int) string { return fmt.Sprintf("host-%05d", i) }

// fleetFile is the manifest's name of the i-th file (from 0).
func fleetFile(i int) string { return fmt.Sprintf("/%s/f%03d.conf", fleetDir, i) }

// fleetContent is what the i-th file of host holds once converged: the
// host's node fact, rendered on the host's worker.
func fleetContent(host string, i int) string {
	return fmt.Sprintf("%s file %d\n", host, i)
}

// fleetYAML is the fleet manifest: n files whose content is rendered from
// the host's facts (the default ordering: one task per host).
func fleetYAML(n int) string {
	var b strings.Builder
	b.WriteString("resources:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - file:\n      name: %s\n      ensure: present\n      mode: \"0644\"\n      content: \"{{ facts.node }} file %d\\n\"\n", fleetFile(i), i)
	}
	return b.String()
}

// runFleet measures each fleet size in turn, each against a fresh server
// and coordinator.
func (h *harness) runFleet(ctx context.Context) (*FleetResult, error) {
	cfg := h.cfg
	res := &FleetResult{Resources: cfg.FleetResources, Runs: cfg.FleetRuns, PerProcess: cfg.FleetPerProcess, LiveRuns: cfg.FleetLiveRuns, MaxConsumers: cfg.FleetMaxConsumers, Executor: cfg.FleetExecutor, Pulls: cfg.FleetPulls, Idle: cfg.FleetIdle}
	if got, err := raiseFileLimit(2*slices.Max(cfg.FleetHosts) + 4096); err != nil {
		h.log.Warn("open files limit short", "limit", got, "error", err)
	} else {
		h.log.Info("open files limit", "limit", got)
	}
	for _, n := range cfg.FleetHosts {
		row := h.fleetSize(ctx, n)
		res.Rows = append(res.Rows, row)
		if row.Err != nil {
			h.log.Warn("fleet failed", "hosts", n, "error", row.Err)
		}
		if h.lines != nil && len(row.Walls) > 0 {
			fmt.Fprintln(h.lines, row.Line(cfg.FleetResources))
			fmt.Fprintln(h.lines, row.MemoryLine())
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// raiseFileLimit raises the open files limit of the harness, which the
// processes it starts inherit, to at least n (the server holds a
// descriptor per host, a host process one per host it holds). An
// unprivileged process may raise its soft limit only up to the hard one:
// it then takes the hard limit and says, in the error, that it is short
// of n (the run goes on: the server needs about one descriptor per host,
// n asks for twice that and some).
func raiseFileLimit(n int) (got uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	want := uint64(n)
	if lim.Cur >= want {
		return lim.Cur, nil
	}
	if lim.Max < want {
		// Only a privileged process may raise the hard limit; up to
		// fs.nr_open.
		hard := want
		if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
			if max, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
				hard = min(hard, max)
			}
		}
		up := lim
		up.Max, up.Cur = max(lim.Max, hard), hard
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up) == nil {
			if up.Cur >= want {
				return up.Cur, nil
			}
			lim = up
		}
		// Not privileged (or capped by fs.nr_open): the soft limit up
		// to the hard one.
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, fmt.Errorf("bench: raise the open files limit to %d: %w", lim.Max, err)
		}
		return lim.Cur, fmt.Errorf("bench: the open files hard limit is %d, below the %d asked (2 per host + 4096): raised to %d; raise the hard limit (ulimit -Hn as root, or the container's nofile) if the server or a host process runs out", lim.Max, want, lim.Cur)
	}
	lim.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("bench: raise the open files limit to %d: %w", want, err)
	}
	return lim.Cur, nil
}

// fleetSize starts a server, a coordinator and n simulated hosts, runs the
// fleet manifest FleetRuns times with `manifold run --each-worker --pool
// fleet` and checks after the first run that every host wrote its files.
func (h *harness) fleetSize(ctx context.Context, n int) *FleetRow {
	cfg := h.cfg
	row := &FleetRow{Hosts: n}
	dir := filepath.Join(h.work, fmt.Sprintf("fleet-%d", n))
	opts := clusterOpts{coordArgs: []string{"--max-tree-runs", strconv.Itoa(n), "--max-tree-runs-limit", strconv.Itoa(max(n, 10000))},
		profileDir: cfg.FleetProfile, label: strconv.Itoa(n), grace: time.Minute}
	if cfg.FleetMaxConsumers != 0 {
		opts.serverConfig = fmt.Sprintf("jetstream {\n  limits {\n    default_max_consumers: %d\n  }\n}\n", cfg.FleetMaxConsumers)
	}
	// The server's live heap is sampled after runs (heapAt) and, with
	// FleetProfile, its heap profile fetched.
	profPort := 0
	if profPort, row.Err = freePort(); row.Err != nil {
		return row
	}
	opts.serverConfig += fmt.Sprintf("prof_port: %d\n", profPort)
	// Its monitoring port (loopback only) answers /subsz: the
	// subscription trie every publish is matched against.
	monPort := 0
	if monPort, row.Err = freePort(); row.Err != nil {
		return row
	}
	opts.serverConfig += fmt.Sprintf("http: \"127.0.0.1:%d\"\n", monPort)
	if cfg.FleetLiveRuns > 0 {
		opts.coordArgs = append(opts.coordArgs, "--max-tree-live-runs", strconv.Itoa(cfg.FleetLiveRuns))
	}
	if cfg.FleetProfile != "" {
		if row.Err = h.mkdirs(cfg.FleetProfile); row.Err != nil {
			return row
		}
	}
	c, err := h.startClusterWith(ctx, dir, opts)
	if err != nil {
		row.Err = err
		return row
	}
	defer c.stop()
	root := cfg.FleetRoot
	if root == "" {
		root = filepath.Join(dir, "hosts")
	}
	for _, d := range []string{root, filepath.Join(dir, "caches"), filepath.Join(dir, "manifest")} {
		if row.Err = h.mkdirs(d); row.Err != nil {
			return row
		}
	}
	m := filepath.Join(dir, "manifest", "fleet.yaml")
	if row.Err = os.WriteFile(m, []byte(fleetYAML(cfg.FleetResources)), 0o644); row.Err != nil {
		return row
	}
	start := time.Now()
	if row.Processes, row.Err = c.startHosts(ctx, n, root, filepath.Join(dir, "caches")); row.Err != nil {
		return row
	}
	row.Start = time.Since(start)
	h.log.Info("fleet hosts ready", "hosts", n, "processes", row.Processes, "took", row.Start)
	// What idle hosts cost, over a fixed window before the first run.
	srv0, hosts0, coord0 := procCPU(c.server.cmd.Process.Pid), c.hostsCPU(), procCPU(c.coord.cmd.Process.Pid)
	select {
	case <-time.After(cfg.FleetIdle):
	case <-ctx.Done():
		row.Err = ctx.Err()
		return row
	}
	row.IdleServerCPU, row.IdleHostsCPU = procCPU(c.server.cmd.Process.Pid)-srv0, c.hostsCPU()-hosts0
	h.log.Info("fleet idle", "hosts", n, "window", cfg.FleetIdle, "server_cpu", row.IdleServerCPU, "hosts_cpu", row.IdleHostsCPU,
		"coordinator_cpu", procCPU(c.coord.cmd.Process.Pid)-coord0)
	subsBefore, _, err := fetchSubsz(ctx, monPort, false, 0)
	if err != nil {
		h.log.Warn("fleet: server subscriptions", "error", err)
	}
	runsStart := time.Now()
	for i := range cfg.FleetRuns {
		cpu0, srv0, hosts0 := procCPU(c.coord.cmd.Process.Pid), procCPU(c.server.cmd.Process.Pid), c.hostsCPU()
		r, err := c.fleetRun(ctx, m, n)
		if err != nil {
			row.Err = fmt.Errorf("run %d of %d: %w", i+1, cfg.FleetRuns, err)
			return row
		}
		row.ReportWalls = append(row.ReportWalls, r.reportWall)
		if r.reportErr != nil && row.ReportErr == nil {
			row.ReportErr = fmt.Errorf("run %d: manifold status --output json: %w", i+1, r.reportErr)
		}
		row.CoordCPU = append(row.CoordCPU, procCPU(c.coord.cmd.Process.Pid)-cpu0)
		row.ServerCPU = append(row.ServerCPU, procCPU(c.server.cmd.Process.Pid)-srv0)
		row.HostsCPU = append(row.HostsCPU, c.hostsCPU()-hosts0)
		row.Walls, row.RunTimes = append(row.Walls, r.wall), append(row.RunTimes, r.runTime)
		row.ServerRSSKiB = append(row.ServerRSSKiB, procStatus(c.server.cmd.Process.Pid, "VmRSS"))
		row.CoordRSSKiB = append(row.CoordRSSKiB, procStatus(c.coord.cmd.Process.Pid, "VmRSS"))
		row.RunEnds = append(row.RunEnds, time.Since(runsStart))
		h.log.Info("fleet run", "hosts", n, "run", i+1, "wall", r.wall, "run_time", r.runTime, "report", r.reportWall, "report_error", r.reportErr,
			"report_cpu", r.reportCPU, "report_server_cpu", r.reportServerCPU, "report_mb", r.reportBytes>>20,
			"server_rss_mb", last(row.ServerRSSKiB)/1024, "coordinator_cpu", last(row.CoordCPU),
			"server_cpu", last(row.ServerCPU), "hosts_cpu", last(row.HostsCPU))
		if i == 0 && cfg.FleetExecutor == ExecutorFile {
			if row.Err = verifyFleet(root, n, cfg.FleetResources); row.Err != nil {
				return row
			}
		}
		if i == 0 || (i+1)%heapEvery == 0 || i == cfg.FleetRuns-1 {
			// After the run's figures: the collections cost the server
			// CPU.
			select {
			case <-time.After(heapQuiet):
			case <-ctx.Done():
				row.Err = ctx.Err()
				return row
			}
			if kib, err := heapAlloc(ctx, profPort); err != nil {
				h.log.Warn("fleet: server live heap", "error", err)
			} else {
				row.ServerHeapKiB, row.HeapRuns = append(row.ServerHeapKiB, kib), append(row.HeapRuns, i+1)
				h.log.Info("fleet server heap", "hosts", n, "run", i+1, "heap_mb", kib/1024)
			}
		}
		if i == 0 && cfg.FleetProfile != "" && cfg.FleetRuns > 1 {
			// The live heap after the first run, against the last's: what
			// the runs leave behind, without the collector's headroom and
			// the buffers RSS counts (after the CPU of the run is taken).
			c.saveHeap(ctx, profPort, filepath.Join(cfg.FleetProfile, fmt.Sprintf("server-heap-%d-first.pprof", n)))
		}
	}
	c.logStreams(ctx, n)
	c.logSubs(ctx, monPort, n, subsBefore, cfg.FleetProfile)
	if cfg.FleetProfile != "" {
		c.saveHeap(ctx, profPort, filepath.Join(cfg.FleetProfile, fmt.Sprintf("server-heap-%d.pprof", n)))
	}
	row.ServerPeakKiB = procStatus(c.server.cmd.Process.Pid, "VmHWM")
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		row.Load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return row
}

// fleetRun submits `manifold run --each-worker --pool fleet M` and waits
// for the run's run_finished event (a core NATS subscription, as a
// follower): the wall time runs from the client's start to that event.
// The run must have succeeded (it fails when a host's child run fails).
// Then `manifold status
// --output json RUN` fetches the whole report, timed apart: its failure
// is recorded, not fatal.
func (c *cluster) fleetRun(ctx context.Context, m string, n int) (fleetRunResult, error) {
	var res fleetRunResult
	timeout := c.h.cfg.timeoutFor(n * c.h.cfg.FleetResources)
	finished := make(chan bus.Event, 1024)
	// Every event, as `manifold run --follow` gets them; only run_finished
	// ones are decoded.
	suffix := "." + string(bus.EventRunFinished)
	sub, err := c.nc.Subscribe(bus.SubjectEventsAll, func(msg *nats.Msg) {
		var ev bus.Event
		if strings.HasSuffix(msg.Subject, suffix) && json.Unmarshal(msg.Data, &ev) == nil {
			finished <- ev
		}
	})
	if err != nil {
		return res, fmt.Errorf("bench: subscribe to events: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	if err := c.nc.Flush(); err != nil {
		return res, fmt.Errorf("bench: %w", err)
	}
	if c.h.cfg.FleetProfile != "" {
		// What the run asks of JetStream, by kind of request, until its
		// report is fetched (the fold's purges run meanwhile): a copy
		// of each request costs the server a delivery, hence with
		// profiles only.
		api, err := countAPI(c.nc)
		if err != nil {
			return res, err
		}
		defer func() {
			if kinds := api.stop(); len(kinds) > 0 {
				c.h.log.Info("fleet api requests", append([]any{"hosts", n, "per_host", api.perHost(n)}, kinds...)...)
			}
		}()
	}
	start := time.Now()
	s := c.h.run.run(ctx, time.Minute, filepath.Dir(m), c.h.manifold,
		"run", "--server", c.url, "--each-worker", "--pool", fleetPool, m)
	if s.err != nil {
		return res, s.err
	}
	id := strings.TrimSpace(string(s.stdout))
	succeeded, failed := 0, []string{}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		var ev bus.Event
		select {
		case ev = <-finished:
		case <-deadline.C:
			return res, fmt.Errorf("run %s: no run_finished event within %s (timeout); %d of %d hosts succeeded so far", id, timeout, succeeded, n)
		case <-ctx.Done():
			return res, ctx.Err()
		}
		if ev.RunID == id {
			res.wall, res.runTime = time.Since(start), time.Duration(ev.DurationMS)*time.Millisecond
			if ev.Status != "succeeded" {
				return res, fmt.Errorf("run %s %s: %s; %d of %d hosts succeeded, failed: %s", id, ev.Status, ev.Error, succeeded, n, strings.Join(failed[:min(len(failed), 5)], "; "))
			}
			break
		}
		if ev.RootRunID != id {
			continue
		}
		if ev.Status == "succeeded" {
			succeeded++
		} else {
			failed = append(failed, ev.Manifest+": "+ev.Error)
		}
	}
	// Events are at most once (core NATS): the run's own status, which
	// fails when a child fails, is what counts; missed child events are
	// only logged.
	if succeeded != n {
		c.h.log.Warn("fleet run: run_finished events of child runs missed", "run_id", id, "seen", succeeded, "hosts", n)
	}
	srv0 := procCPU(c.server.cmd.Process.Pid)
	rs := c.h.run.run(ctx, 5*time.Minute, "", c.h.manifold, "status", "--server", c.url, "--output", "json", id)
	res.reportWall, res.reportErr = rs.wall, rs.err
	res.reportCPU, res.reportServerCPU = rs.cpu, procCPU(c.server.cmd.Process.Pid)-srv0
	res.reportBytes = len(rs.stdout) // at most maxOutput
	if rs.err == nil {
		var whole bool
		if whole, res.reportErr = checkFleetReport(rs.stdout, id, n); !whole && res.reportErr == nil {
			c.h.log.Warn("fleet run: report larger than the harness keeps: its head checked, not its hosts", "run_id", id, "kept_mb", maxOutput>>20)
		}
	}
	return res, nil
}

// checkFleetReport checks the report `manifold status --output json`
// printed for fan-out id over n hosts: it succeeded with n child runs.
// Past what the harness keeps of an output (maxOutput; a 10,000-host
// report is some 105 MB indented) only its head is checked, whole
// false: the hosts were counted from the run's events.
func checkFleetReport(stdout []byte, id string, n int) (whole bool, err error) {
	if len(stdout) >= maxOutput {
		if head := stdout[:4096]; !bytes.Contains(head, []byte(`"status": "succeeded"`)) {
			return false, fmt.Errorf("report of %s: no \"status\": \"succeeded\" in its first %d bytes", id, len(head))
		}
		return false, nil
	}
	r, err := parseReport(stdout)
	if err != nil {
		return true, err
	}
	if len(r.Resources) != n {
		return true, fmt.Errorf("report of %s: %d child runs, want %d", id, len(r.Resources), n)
	}
	return true, nil
}

// fleetRunResult is what one fleet run measured.
type fleetRunResult struct {
	wall, runTime time.Duration
	// reportWall is the time `manifold status --output json` took to
	// print the whole report, reportErr its failure.
	reportWall time.Duration
	reportErr  error
	// reportCPU is the CPU time (user + system) of the status process,
	// reportServerCPU the server's over the fetch: a fetch slower than
	// both is waiting. reportBytes is the size of its output kept (at
	// most maxOutput).
	reportCPU, reportServerCPU time.Duration
	reportBytes                int
}

// verifyFleet checks that every host's files hold their content.
func verifyFleet(root string, hosts, files int) error {
	for i := 1; i <= hosts; i++ {
		host := hostName(i)
		for j := range files {
			p := filepath.Join(root, host, fleetFile(j))
			b, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("bench: fleet: %w", err)
			}
			if want := fleetContent(host, j); string(b) != want {
				return fmt.Errorf("bench: fleet: %s holds %q, want %q", p, b, want)
			}
		}
	}
	return nil
}

// startHosts starts host processes (`benchrun fleet-hosts`) holding n
// simulated hosts, FleetPerProcess each, and waits until each has printed
// that all its hosts are registered. It returns the number of processes.
func (c *cluster) startHosts(ctx context.Context, n int, root, caches string) (int, error) {
	per := c.h.cfg.FleetPerProcess
	type ready struct {
		name string
		err  error
	}
	readyc := make(chan ready, (n+per-1)/per)
	procs := 0
	for first := 1; first <= n; first += per {
		count := min(per, n-first+1)
		name := fmt.Sprintf("hosts-%05d", first)
		d := &daemon{name: name, log: filepath.Join(c.dir, "logs", name+".log"), done: make(chan struct{})}
		f, err := os.Create(d.log)
		if err != nil {
			return procs, fmt.Errorf("bench: %w", err)
		}
		args := []string{fleetHostsCommand, "--server", c.url, "--first", strconv.Itoa(first),
			"--n", strconv.Itoa(count), "--root", root, "--cache-dir", caches, "--pool", fleetPool, "--executor", c.h.cfg.FleetExecutor, "--pulls", c.h.cfg.FleetPulls}
		if c.opts.profileDir != "" {
			args = append(args, "--cpu-profile", filepath.Join(c.opts.profileDir, name+"-"+c.opts.label+".pprof"))
		}
		d.cmd = c.h.run.command(c.h.benchrun, args...)
		d.grace = c.opts.grace
		d.cmd.Stderr = f
		out, err := d.cmd.StdoutPipe()
		if err != nil {
			f.Close()
			return procs, fmt.Errorf("bench: %w", err)
		}
		if err := d.cmd.Start(); err != nil {
			f.Close()
			return procs, fmt.Errorf("bench: start %s: %w", name, err)
		}
		procs++
		c.workers = append(c.workers, d)
		go func() {
			sc := bufio.NewScanner(out)
			ok := false
			for sc.Scan() {
				if !ok && sc.Text() == fleetReadyLine(count) {
					ok = true
					readyc <- ready{name: name}
				}
			}
			if !ok {
				readyc <- ready{name: name, err: fmt.Errorf("%s ended before its hosts were ready", name)}
			}
			_, _ = io.Copy(io.Discard, out)
			d.err = d.cmd.Wait()
			f.Close()
			close(d.done)
		}()
	}
	timeout := hostsStartTimeout(n)
	deadline := time.After(timeout)
	progress := time.NewTicker(30 * time.Second)
	defer progress.Stop()
	start := time.Now()
	for done := 0; done < procs; {
		select {
		case r := <-readyc:
			if r.err != nil {
				b, _ := os.ReadFile(filepath.Join(c.dir, "logs", r.name+".log"))
				return procs, fmt.Errorf("bench: %w: %s", r.err, tail(b, nil))
			}
			done++
		case <-progress.C:
			c.h.log.Info("fleet hosts starting", "ready", min(done*per, n), "hosts", n,
				"elapsed", time.Since(start).Round(time.Second), "timeout", timeout)
		case <-deadline:
			return procs, fmt.Errorf("bench: %d fleet hosts not ready within %s (timeout; %d of %d host processes ready)", n, timeout, done, procs)
		case <-ctx.Done():
			return procs, ctx.Err()
		}
	}
	return procs, nil
}

// hostsStartTimeout bounds the start of n hosts: a minute and 60 ms a
// host (10,000 hosts: 11 minutes). On loopback a host's start is bound by
// the server's CPU, which grows with the hosts already there.
func hostsStartTimeout(n int) time.Duration {
	return time.Minute + time.Duration(n)*60*time.Millisecond
}

// hostsCPU is the CPU time the cluster's host processes have used.
func (c *cluster) hostsCPU() time.Duration {
	var d time.Duration
	for _, w := range c.workers {
		d += procCPU(w.cmd.Process.Pid)
	}
	return d
}

// clockTicks is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on
// Linux).
const clockTicks = 100

// procCPU returns the CPU time (user + system) process pid has used, 0
// when it cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from the last ')'. utime and stime are fields 14 and 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(u+st) * time.Second / clockTicks
}

// procStatus returns a "kB" field of /proc/PID/status (VmRSS, VmHWM) in
// KiB, 0 when it cannot be read.
func procStatus(pid int, field string) int64 {
	v := procField(fmt.Sprintf("/proc/%d/status", pid), field)
	kb, ok := strings.CutSuffix(v, " kB")
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(kb), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// logStreams logs what every stream holds after the runs (messages,
// bytes, subjects): what a fleet run leaves behind in the server.
func (c *cluster) logStreams(ctx context.Context, n int) {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return
	}
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			continue
		}
		st := s.CachedInfo().State
		c.h.log.Info("fleet stream", "hosts", n, "stream", name, "msgs", st.Msgs, "bytes", st.Bytes,
			"subjects", st.NumSubjects, "deleted", st.NumDeleted, "consumers", st.Consumers)
	}
}

// heapAlloc returns the server's live heap in KiB: HeapAlloc (from its
// prof_port's heap profile, in text) after a second forced collection;
// the first leaves the buffers its sync.Pools held (the file store's
// block buffers among them) in the pools' victim caches, still counted.
func heapAlloc(ctx context.Context, port int) (int64, error) {
	var kib int64
	for range 2 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1&debug=1", port), nil)
		if err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		if kib, err = parseHeapAlloc(data); err != nil {
			return 0, err
		}
	}
	return kib, nil
}

// parseHeapAlloc reads "# HeapAlloc = N" (bytes) from a heap profile in
// text (debug=1) and returns N in KiB.
func parseHeapAlloc(profile []byte) (int64, error) {
	for line := range strings.Lines(string(profile)) {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("bench: heap profile: %q: %w", line, err)
			}
			return n >> 10, nil
		}
	}
	return 0, fmt.Errorf("bench: heap profile has no HeapAlloc line")
}

// saveHeap writes the server's heap profile (its prof_port) to path.
func (c *cluster) saveHeap(ctx context.Context, port int, path string) {
	c.saveProfile(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", port), path)
}

// saveProfile writes the profile url answers (the server's prof_port) to
// path.
func (c *cluster) saveProfile(ctx context.Context, url, path string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.h.log.Warn("fleet: server profile", "url", url, "error", err)
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		c.h.log.Warn("fleet: server profile", "url", url, "error", err)
	}
}

// idle is the idle window of the result (results of earlier versions
// have none: theirs was 5 s).
func (f *FleetResult) idle() time.Duration { return cmp.Or(f.Idle, defaultIdleWindow) }

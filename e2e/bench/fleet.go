package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	Rows     []*FleetRow
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
	// CoordCPU is the coordinator's CPU time (user + system) over each
	// run.
	CoordCPU []time.Duration
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
// the coordinator's RSS after the first and the last run.
func (r *FleetRow) MemoryLine() string {
	first := func(s []int64) float64 {
		if len(s) == 0 {
			return 0
		}
		return float64(s[0]) / 1024
	}
	return fmt.Sprintf("fleet hosts=%d runs=%d server_rss_mb_first=%.0f server_rss_mb_last=%.0f coordinator_rss_mb_first=%.0f coordinator_rss_mb_last=%.0f",
		r.Hosts, len(r.Walls), first(r.ServerRSSKiB), float64(last(r.ServerRSSKiB))/1024, first(r.CoordRSSKiB), float64(last(r.CoordRSSKiB))/1024)
}

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
	res := &FleetResult{Resources: cfg.FleetResources, Runs: cfg.FleetRuns, PerProcess: cfg.FleetPerProcess, LiveRuns: cfg.FleetLiveRuns}
	if err := raiseFileLimit(2*slices.Max(cfg.FleetHosts) + 4096); err != nil {
		h.log.Warn("open files limit not raised", "error", err)
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
// descriptor per host, a host process one per host it holds).
func raiseFileLimit(n int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	want := uint64(n)
	if lim.Cur >= want {
		return nil
	}
	if lim.Max < want {
		// Only a privileged process may raise the hard limit; up to
		// fs.nr_open.
		if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
			if max, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
				want = min(want, max)
			}
		}
		lim.Max = max(lim.Max, want)
	}
	lim.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("bench: raise the open files limit to %d: %w", want, err)
	}
	return nil
}

// fleetSize starts a server, a coordinator and n simulated hosts, runs the
// fleet manifest FleetRuns times with `manifold run --each-worker --pool
// fleet` and checks after the first run that every host wrote its files.
func (h *harness) fleetSize(ctx context.Context, n int) *FleetRow {
	cfg := h.cfg
	row := &FleetRow{Hosts: n}
	dir := filepath.Join(h.work, fmt.Sprintf("fleet-%d", n))
	opts := clusterOpts{coordArgs: []string{"--max-tree-runs", strconv.Itoa(n), "--max-tree-runs-limit", strconv.Itoa(max(n, 10000))},
		profileDir: cfg.FleetProfile, label: strconv.Itoa(n)}
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
	for i := range cfg.FleetRuns {
		cpu0 := procCPU(c.coord.cmd.Process.Pid)
		changed := cfg.FleetResources * n
		if i > 0 {
			changed = 0
		}
		r, wall, err := c.fleetRun(ctx, m, n, changed)
		if err != nil {
			row.Err = fmt.Errorf("run %d of %d: %w", i+1, cfg.FleetRuns, err)
			return row
		}
		row.CoordCPU = append(row.CoordCPU, procCPU(c.coord.cmd.Process.Pid)-cpu0)
		row.Walls, row.RunTimes = append(row.Walls, wall), append(row.RunTimes, r.runTime())
		row.ServerRSSKiB = append(row.ServerRSSKiB, procStatus(c.server.cmd.Process.Pid, "VmRSS"))
		row.CoordRSSKiB = append(row.CoordRSSKiB, procStatus(c.coord.cmd.Process.Pid, "VmRSS"))
		h.log.Info("fleet run", "hosts", n, "run", i+1, "wall", wall, "run_time", r.runTime(),
			"server_rss_mb", last(row.ServerRSSKiB)/1024, "coordinator_cpu", last(row.CoordCPU))
		if i == 0 {
			if row.Err = verifyFleet(root, n, cfg.FleetResources); row.Err != nil {
				return row
			}
		}
	}
	row.ServerPeakKiB = procStatus(c.server.cmd.Process.Pid, "VmHWM")
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		row.Load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return row
}

// fleetRun runs `manifold run --each-worker --pool fleet --output json M`
// and checks the report: n child runs, succeeded, changed of the hosts'
// resources changed.
func (c *cluster) fleetRun(ctx context.Context, m string, n, changed int) (*runReport, time.Duration, error) {
	timeout := c.h.cfg.timeoutFor(n * c.h.cfg.FleetResources)
	s := c.h.run.run(ctx, timeout+10*time.Second, filepath.Dir(m), c.h.manifold,
		"run", "--server", c.url, "--each-worker", "--pool", fleetPool, "--output", "json", "--timeout", timeout.String(), m)
	if s.err != nil {
		return nil, 0, s.err
	}
	r, err := parseReport(s.stdout)
	if err != nil {
		return nil, 0, err
	}
	if len(r.Resources) != n {
		return nil, 0, fmt.Errorf("run %s: %d child runs, want one per host (%d)", r.RunID, len(r.Resources), n)
	}
	got := 0
	for _, res := range r.Resources {
		if res.Child == nil {
			return nil, 0, fmt.Errorf("run %s: %s has no child report", r.RunID, res.Ref)
		}
		got += res.Child.Counts.Changed
	}
	if got != changed {
		return nil, 0, fmt.Errorf("run %s: %d resources changed on the hosts, want %d", r.RunID, got, changed)
	}
	return r, s.wall, nil
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
		d.cmd = c.h.run.command(c.h.benchrun, fleetHostsCommand, "--server", c.url, "--first", strconv.Itoa(first),
			"--n", strconv.Itoa(count), "--root", root, "--cache-dir", caches, "--pool", fleetPool)
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
	timeout := time.Minute + time.Duration(n)*20*time.Millisecond
	deadline := time.After(timeout)
	for range procs {
		select {
		case r := <-readyc:
			if r.err != nil {
				b, _ := os.ReadFile(filepath.Join(c.dir, "logs", r.name+".log"))
				return procs, fmt.Errorf("bench: %w: %s", r.err, tail(b, nil))
			}
		case <-deadline:
			return procs, fmt.Errorf("bench: %d fleet hosts not ready within %s (timeout)", n, timeout)
		case <-ctx.Done():
			return procs, ctx.Err()
		}
	}
	return procs, nil
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

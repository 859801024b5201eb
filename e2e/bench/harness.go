package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Config is what one harness run measures. Zero values take the defaults
// of WithDefaults.
type Config struct {
	// Root is the module root (holding go.mod). Defaults to what `go env
	// GOMOD` says.
	Root string
	// Sizes are the numbers of file resources. Defaults to 1, 200, 2,000
	// and 20,000.
	Sizes []int
	// Reps is the number of repetitions of each measurement (the median is
	// reported). Defaults to 5.
	Reps int
	// LargeReps replaces Reps for sizes of LargeN and more. Defaults to 3.
	LargeReps int
	// LargeN is the size from which LargeReps applies. Defaults to 10,000.
	LargeN int
	// CCM is the path of a CCM binary to compare with; empty: manifold only.
	CCM string
	// CCMMaxN skips CCM at sizes above it. Defaults to no limit.
	CCMMaxN int
	// Modes selects what runs. Defaults to every mode.
	Modes []Mode
	// Workers are the worker counts of the distributed throughput.
	// Defaults to 1, 2 and 4.
	Workers []int
	// DistN is the number of trivial tasks of a distributed run. Defaults
	// to 2,000.
	DistN int
	// ChainN is the number of resources of the run in declaration order
	// whose per-task latency is measured. Defaults to 200.
	ChainN int
	// TimeoutBase and TimeoutPerResource bound every child process:
	// base + per resource × N. Default to 60s and 20ms.
	TimeoutBase        time.Duration
	TimeoutPerResource time.Duration
	// Write writes the results to Results.
	Write bool
	// Results is the Markdown file written with Write. Defaults to
	// e2e/bench/RESULTS.md under Root.
	Results string
	// Keep keeps the work directory (for inspection).
	Keep bool
	// Command is the command line recorded in the results.
	Command string
	// FleetHosts are the fleet sizes (simulated hosts) of mode fleet.
	// Defaults to 1,000.
	FleetHosts []int
	// FleetResources is the number of file resources of the fleet
	// manifest. Defaults to 20.
	FleetResources int
	// FleetRuns is the number of consecutive fleet runs per size (server
	// RSS is reported after the first and the last). Defaults to 3.
	FleetRuns int
	// FleetPerProcess is how many simulated hosts one host process holds.
	// Defaults to 2,500.
	FleetPerProcess int
	// FleetRoot holds the simulated hosts' roots (host-NNNNN/ each).
	// Defaults to a directory in the work directory, removed with it.
	FleetRoot string
	// FleetLiveRuns, when set, is the coordinator's --max-tree-live-runs
	// (else the coordinator's default).
	FleetLiveRuns int
	// FleetExecutor is how simulated hosts apply file resources:
	// ExecutorFile (real files under each host's root, checked after the
	// first run) or ExecutorMemory (contents kept in the host process: the
	// control plane's cost without the disk's). Defaults to ExecutorFile.
	FleetExecutor string
	// FleetPulls is how the simulated hosts of one host process take the
	// pool's tasks: PullsShared (one puller per process, shared by its
	// hosts: the pool's consumer holds one waiting pull per process) or
	// PullsHost (one per host, as a real fleet's: the consumer holds a
	// pull per host and walks them all whenever one arrives, expires or is
	// due a heartbeat). Fleet runs take no pool task (a child run is
	// pinned to its host). Defaults to PullsShared.
	FleetPulls string
	// FleetMaxConsumers, when set, is the server's JetStream
	// default_max_consumers (consumers per stream; -1: unlimited). The
	// server's own default is 1,000, and every worker has a consumer of
	// its own on the tasks stream.
	FleetMaxConsumers int
	// FleetProfile, when set, is a directory where the server and the
	// coordinator of each fleet size write CPU profiles
	// (MANIFOLD_CPU_PROFILE), server-N.pprof and coordinator-N.pprof.
	FleetProfile string
	// CPUProfiles, when set, is a directory where every manifold command
	// of the files and level modes writes a CPU profile
	// (MANIFOLD_CPU_PROFILE), N.pprof: merged, the profile the release
	// build is optimised with (ReleasePGO; `task pgo`).
	CPUProfiles string
	// FleetIdle is how long idle hosts are measured (every host
	// registered, before the first run). Defaults to 5 s; a pool's idle
	// pulls are sent a heartbeat every 5 minutes, so a window of minutes
	// shows their cost too.
	FleetIdle time.Duration
}

// Mode is a part of the harness that can be selected.
type Mode string

// Modes.
const (
	ModeFiles Mode = "files" // the file scenarios (and the floor)
	ModeDist  Mode = "dist"  // distributed throughput and per-task latency
	ModeLevel Mode = "level" // the cost of one apply level
	ModeFleet Mode = "fleet" // each-worker runs over simulated hosts
)

// allModes lists the default modes in running order.
var allModes = []Mode{ModeFiles, ModeLevel, ModeDist}

// knownModes lists every mode: the default ones, then fleet (minutes and
// thousands of connections: only when asked for).
var knownModes = []Mode{ModeFiles, ModeLevel, ModeDist, ModeFleet}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if len(c.Sizes) == 0 {
		c.Sizes = []int{1, 200, 2000, 20000}
	}
	c.Reps = cmp.Or(c.Reps, 5)
	c.LargeReps = cmp.Or(c.LargeReps, 3)
	c.LargeN = cmp.Or(c.LargeN, 10000)
	if len(c.Modes) == 0 {
		c.Modes = allModes
	}
	if len(c.Workers) == 0 {
		c.Workers = []int{1, 2, 4}
	}
	c.DistN = cmp.Or(c.DistN, 2000)
	c.ChainN = cmp.Or(c.ChainN, 200)
	c.TimeoutBase = cmp.Or(c.TimeoutBase, 60*time.Second)
	c.TimeoutPerResource = cmp.Or(c.TimeoutPerResource, 20*time.Millisecond)
	if len(c.FleetHosts) == 0 {
		c.FleetHosts = []int{1000}
	}
	c.FleetResources = cmp.Or(c.FleetResources, 20)
	c.FleetRuns = cmp.Or(c.FleetRuns, 3)
	c.FleetIdle = cmp.Or(c.FleetIdle, defaultIdleWindow)
	c.FleetPerProcess = cmp.Or(c.FleetPerProcess, 2500)
	c.FleetExecutor = cmp.Or(c.FleetExecutor, ExecutorFile)
	c.FleetPulls = cmp.Or(c.FleetPulls, PullsShared)
	if c.Results == "" && c.Root != "" {
		c.Results = filepath.Join(c.Root, "e2e", "bench", "RESULTS.md")
	}
	return c
}

// Limits of the configuration.
const (
	// MaxSize is the largest size accepted.
	MaxSize = 100000
	// MaxReps is the largest number of repetitions accepted.
	MaxReps = 100
	// MaxWorkers is the largest worker count accepted.
	MaxWorkers = 16
	// MaxFleetHosts is the largest fleet accepted.
	MaxFleetHosts = 20000
	// MaxFleetResources is the largest fleet manifest accepted.
	MaxFleetResources = 1000
	// MaxFleetIdle is the longest idle window accepted.
	MaxFleetIdle = 30 * time.Minute
)

// validate checks a configuration after WithDefaults.
func (c Config) validate() error {
	var errs []error
	for _, n := range c.Sizes {
		if n < 1 || n > MaxSize {
			errs = append(errs, fmt.Errorf("size %d: want 1 to %d", n, MaxSize))
		}
	}
	for _, r := range []int{c.Reps, c.LargeReps} {
		if r < 1 || r > MaxReps {
			errs = append(errs, fmt.Errorf("repetitions %d: want 1 to %d", r, MaxReps))
		}
	}
	for _, w := range c.Workers {
		if w < 1 || w > MaxWorkers {
			errs = append(errs, fmt.Errorf("workers %d: want 1 to %d", w, MaxWorkers))
		}
	}
	if c.DistN < 1 || c.DistN > MaxSize || c.ChainN < 1 || c.ChainN > MaxSize {
		errs = append(errs, fmt.Errorf("dist-n %d, chain-n %d: want 1 to %d", c.DistN, c.ChainN, MaxSize))
	}
	for _, m := range c.Modes {
		if !slices.Contains(knownModes, m) {
			errs = append(errs, fmt.Errorf("mode %q: want one of %v", m, knownModes))
		}
	}
	for _, n := range c.FleetHosts {
		if n < 1 || n > MaxFleetHosts {
			errs = append(errs, fmt.Errorf("fleet hosts %d: want 1 to %d", n, MaxFleetHosts))
		}
	}
	if c.FleetResources < 1 || c.FleetResources > MaxFleetResources {
		errs = append(errs, fmt.Errorf("fleet resources %d: want 1 to %d", c.FleetResources, MaxFleetResources))
	}
	if c.FleetIdle < time.Second || c.FleetIdle > MaxFleetIdle {
		errs = append(errs, fmt.Errorf("fleet idle window %s: want 1s to %s", c.FleetIdle, MaxFleetIdle))
	}
	if c.FleetRuns < 1 || c.FleetRuns > MaxReps {
		errs = append(errs, fmt.Errorf("fleet runs %d: want 1 to %d", c.FleetRuns, MaxReps))
	}
	if c.FleetPerProcess < 1 || c.FleetPerProcess > MaxFleetHosts {
		errs = append(errs, fmt.Errorf("fleet hosts per process %d: want 1 to %d", c.FleetPerProcess, MaxFleetHosts))
	}
	if c.FleetExecutor != ExecutorFile && c.FleetExecutor != ExecutorMemory {
		errs = append(errs, fmt.Errorf("fleet executor %q: want %s or %s", c.FleetExecutor, ExecutorFile, ExecutorMemory))
	}
	if c.FleetPulls != PullsShared && c.FleetPulls != PullsHost {
		errs = append(errs, fmt.Errorf("fleet pulls %q: want %s or %s", c.FleetPulls, PullsShared, PullsHost))
	}
	if c.FleetLiveRuns < 0 {
		errs = append(errs, fmt.Errorf("fleet live runs %d: must not be negative", c.FleetLiveRuns))
	}
	if c.Root == "" {
		errs = append(errs, errors.New("no module root"))
	}
	if c.TimeoutBase < 0 || c.TimeoutPerResource < 0 {
		errs = append(errs, errors.New("timeouts must not be negative"))
	}
	return errors.Join(errs...)
}

// repsFor returns the repetitions at size n.
func (c Config) repsFor(n int) int {
	if n >= c.LargeN {
		return c.LargeReps
	}
	return c.Reps
}

// timeoutFor bounds one child process handling n resources.
func (c Config) timeoutFor(n int) time.Duration {
	return c.TimeoutBase + time.Duration(n)*c.TimeoutPerResource
}

// has reports whether mode m is selected.
func (c Config) has(m Mode) bool { return slices.Contains(c.Modes, m) }

// harness holds what one harness run shares.
type harness struct {
	cfg      Config
	log      *slog.Logger
	id       identity
	run      *runner
	work     string
	manifold string
	ccm      string
	// benchrun is the harness's own binary (its hidden fleet-hosts
	// command hosts simulated hosts), built for mode fleet.
	benchrun string
	// lines receives the one-line summaries of mode fleet as they come
	// (nil: none).
	lines io.Writer
	// ccmVersion is what `ccm --version` printed.
	ccmVersion string
}

// Results is everything one harness run measured.
type Results struct {
	Machine Machine
	Config  Config
	Files   []*FilesResult
	Level   *LevelResult
	Dist    *DistResult
	Fleet   *FleetResult
	// CCMVersion is what the CCM binary's --version printed.
	CCMVersion string
	// RSSMethod says how peak RSS was measured.
	RSSMethod string
	// Errors are failures of whole modes.
	Errors []string
	// Started and Took time the harness run.
	Started time.Time
	Took    time.Duration
}

// Run builds manifold, measures what cfg selects and returns the results;
// progress goes to logw. Child processes are bounded by the configured
// timeouts and the work directory is removed at the end unless Keep.
func Run(ctx context.Context, cfg Config, logw io.Writer) (*Results, error) {
	return runWith(ctx, cfg, nil, logw)
}

// runWith is Run printing the fleet lines to lines as they come.
func runWith(ctx context.Context, cfg Config, lines, logw io.Writer) (*Results, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	h := &harness{cfg: cfg, log: slog.New(slog.NewTextHandler(logw, nil)), lines: lines}
	var err error
	if h.id, err = currentIdentity(); err != nil {
		return nil, err
	}
	if h.work, err = os.MkdirTemp("", "manifold-bench-"); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if cfg.Keep {
		h.log.Info("work directory kept", "dir", h.work)
	} else {
		defer os.RemoveAll(h.work)
	}
	// The work directory must be reachable by the unprivileged user.
	if err := os.Chmod(h.work, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	home := filepath.Join(h.work, "home")
	if err := h.mkdirs(home); err != nil {
		return nil, err
	}
	h.run = &runner{id: h.id, home: home}
	if fi, err := os.Stat(gnuTime); err == nil && fi.Mode()&0o111 != 0 {
		h.run.timeBin = gnuTime
	}
	if err := h.build(ctx); err != nil {
		return nil, err
	}
	if cfg.CPUProfiles != "" {
		if err := h.mkdirs(cfg.CPUProfiles); err != nil {
			return nil, err
		}
		h.run.profiles, h.run.profiled = cfg.CPUProfiles, h.manifold
	}
	res := &Results{Config: cfg, Started: time.Now()}
	res.Machine = describeMachine(ctx, cfg.Root)
	res.RSSMethod = h.run.rssMethod()
	res.CCMVersion = h.ccmVersion
	if cfg.has(ModeFiles) {
		for _, n := range cfg.Sizes {
			tools := []tool{manifoldTool(h.manifold)}
			if h.ccm != "" && (cfg.CCMMaxN == 0 || n <= cfg.CCMMaxN) {
				tools = append(tools, ccmTool(h.ccm))
			}
			fr, err := h.runFiles(ctx, n, cfg.repsFor(n), tools)
			if err != nil {
				return nil, err
			}
			if h.ccm != "" && len(tools) == 1 {
				fr.note = fmt.Sprintf("CCM not run above %d resources (--ccm-max-n)", cfg.CCMMaxN)
			}
			res.Files = append(res.Files, fr)
		}
	}
	if cfg.has(ModeLevel) {
		lr, err := h.runLevel(ctx)
		if err != nil {
			res.Errors = append(res.Errors, "apply level: "+err.Error())
		}
		res.Level = lr
	}
	if cfg.has(ModeDist) {
		dr, err := h.runDist(ctx)
		if err != nil {
			res.Errors = append(res.Errors, "distributed: "+err.Error())
		}
		res.Dist = dr
	}
	if cfg.has(ModeFleet) {
		fr, err := h.runFleet(ctx)
		if err != nil {
			res.Errors = append(res.Errors, "fleet: "+err.Error())
		}
		res.Fleet = fr
	}
	res.Took = time.Since(res.Started)
	return res, ctx.Err()
}

// The harness measures manifold as it is shipped: built as deploy/Dockerfile
// builds the image's binary (static, no cgo, symbols stripped, optimised
// with the profile ReleasePGO; TestHarnessBuildsAsTheImage). A static
// binary starts without the dynamic loader and the C library (some 2 ms
// of a 1-file apply on this machine); its user and group lookups read
// /etc/passwd and /etc/group and ask getent(1) for other names
// (resources/ids).
var (
	releaseBuildEnv   = []string{"CGO_ENABLED=0"}
	releaseBuildFlags = []string{"-trimpath", "-pgo=" + ReleasePGO, "-ldflags", "-s -w"}
)

// ReleasePGO is the CPU profile, relative to the module root, that the
// release build gives the compiler (profile-guided optimisation): CPU
// profiles of the benchmark's own workloads (`benchrun --cpu-profiles`)
// merged by `go tool pprof -proto`; `task pgo` makes it anew. It is not
// cmd/manifold/default.pgo, which every `go build` and `go test` of the
// package would take: the tests and the development builds stay unoptimised
// (a profile makes the first build of every package take longer).
const ReleasePGO = "cmd/manifold/release.pgo"

// releaseBuildCommandFlags is releaseBuildFlags as a shell would take them.
func releaseBuildCommandFlags() string {
	var b strings.Builder
	for i, f := range releaseBuildFlags {
		if i > 0 {
			b.WriteByte(' ')
		}
		if strings.ContainsAny(f, " \t") {
			f = `"` + f + `"`
		}
		b.WriteString(f)
	}
	return b.String()
}

// build builds manifold into the work directory and copies the CCM binary
// next to it (where the unprivileged user can run it).
func (h *harness) build(ctx context.Context) error {
	bin := filepath.Join(h.work, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	h.manifold = filepath.Join(bin, "manifold")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"build"}, releaseBuildFlags...), "-o", h.manifold, "./cmd/manifold")...)
	cmd.Dir = h.cfg.Root
	cmd.Env = append(os.Environ(), releaseBuildEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("bench: go build ./cmd/manifold: %w\n%s", err, out)
	}
	if h.cfg.has(ModeFleet) || h.cfg.has(ModeDist) { // fleet hosts; the bus floor's roles
		h.benchrun = filepath.Join(bin, "benchrun")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", h.benchrun, "./e2e/bench/cmd/benchrun")
		cmd.Dir = h.cfg.Root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("bench: go build ./e2e/bench/cmd/benchrun: %w\n%s", err, out)
		}
	}
	if h.cfg.CCM == "" {
		return nil
	}
	h.ccm = filepath.Join(bin, "ccm")
	if err := copyFile(h.cfg.CCM, h.ccm); err != nil {
		return fmt.Errorf("bench: --ccm: %w", err)
	}
	v, err := toolVersion(ctx, h.run, h.ccm)
	if err != nil {
		return fmt.Errorf("bench: --ccm %s does not run: %w", h.cfg.CCM, err)
	}
	h.ccmVersion = v
	h.log.Info("CCM", "version", h.ccmVersion)
	return nil
}

// toolVersion returns what `bin --version` prints: on stdout, or on
// stderr when stdout is empty (CCM's command-line library writes it
// there).
func toolVersion(ctx context.Context, r *runner, bin string) (string, error) {
	s := r.run(ctx, time.Minute, "", bin, "--version")
	if s.err != nil {
		return "", s.err
	}
	if v := strings.TrimSpace(string(s.stdout)); v != "" {
		return v, nil
	}
	return strings.TrimSpace(string(s.stderr)), nil
}

// copyFile copies an executable, streaming (the harness keeps its own RSS
// small).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// mkdirs creates dir (and its parents) owned by the measured user.
func (h *harness) mkdirs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := os.Chown(dir, h.id.uid, h.id.gid); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

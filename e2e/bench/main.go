package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Main parses the harness's command line, runs it, prints the Markdown
// table on stdout (and writes it with --write) and returns the exit code:
// 0, 1 when a measurement failed, 2 for bad flags.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == fleetHostsCommand {
		return fleetHostsMain(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == busFloorCommand {
		return busFloorMain(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("benchrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg                      Config
		sizes, workers, modes    string
		fleetHosts               string
		timeoutBase, timeoutPerN = fs.Duration("timeout", 0, "bound of every child process: this plus --timeout-per-resource × N (default 60s)"), fs.Duration("timeout-per-resource", 0, "added to --timeout per resource (default 20ms)")
	)
	fs.StringVar(&sizes, "sizes", "1,200,2000,20000", "numbers of file resources, comma-separated")
	fs.IntVar(&cfg.Reps, "reps", 5, "repetitions of each measurement (the median is reported)")
	fs.IntVar(&cfg.LargeReps, "large-reps", 3, "repetitions at sizes of --large-n and more")
	fs.IntVar(&cfg.LargeN, "large-n", 10000, "size from which --large-reps applies")
	fs.StringVar(&cfg.CCM, "ccm", "", "path of a CCM binary: run every scenario for CCM too, pair by pair, and print manifold/CCM ratios")
	fs.IntVar(&cfg.CCMMaxN, "ccm-max-n", 0, "skip CCM at sizes above this (0: no limit)")
	fs.StringVar(&modes, "modes", "files,level,dist", "what to measure: files (file scenarios and the floor), level (one apply level), dist (distributed throughput and latency), fleet (each-worker runs over simulated hosts; never by default)")
	fs.StringVar(&fleetHosts, "fleet-hosts", "1000", "fleet sizes (simulated hosts) of mode fleet, comma-separated")
	fs.IntVar(&cfg.FleetResources, "fleet-resources", 20, "file resources of the fleet manifest (each host writes them under its own root)")
	fs.IntVar(&cfg.FleetRuns, "fleet-runs", 3, "consecutive fleet runs per size (server RSS is printed after the first and the last)")
	fs.IntVar(&cfg.FleetPerProcess, "fleet-per-process", 2500, "simulated hosts per host process")
	fs.StringVar(&cfg.FleetRoot, "fleet-root", "", "directory of the simulated hosts' roots, host-NNNNN/ each (default: in the work directory)")
	fs.IntVar(&cfg.FleetLiveRuns, "fleet-live-runs", 0, "the coordinator's --max-tree-live-runs for mode fleet (0: its default)")
	fs.StringVar(&cfg.FleetExecutor, "fleet-executor", ExecutorFile, "how simulated hosts apply files: file (real files under each host's root) or memory (contents kept in the host process: no disk)")
	fs.StringVar(&cfg.FleetPulls, "fleet-pulls", PullsShared, "how simulated hosts take the pool's tasks: shared (one puller per host process) or host (one per host, a real fleet's pulls)")
	fs.IntVar(&cfg.FleetMaxConsumers, "fleet-max-consumers", 0, "the server's JetStream default_max_consumers for mode fleet (-1: unlimited; 0: the server's default, 1,000 per stream)")
	fs.DurationVar(&cfg.FleetIdle, "fleet-idle", defaultIdleWindow, "how long idle hosts are measured before the first run (1s to 30m; the idle server / hosts CPU is per second of it)")
	fs.StringVar(&cfg.FleetProfile, "fleet-profile", "", "write CPU profiles of the server, the coordinator and the host processes of each fleet size, and the server's heap after the first and the last run, into this directory")
	fs.StringVar(&cfg.CPUProfiles, "cpu-profiles", "", "write a CPU profile of every manifold command of the files and level modes into this directory (the input of "+ReleasePGO+": task pgo)")
	fs.StringVar(&workers, "workers", "1,2,4", "worker counts of the distributed throughput")
	fs.IntVar(&cfg.DistN, "dist-n", 2000, "trivial tasks per distributed throughput run")
	fs.IntVar(&cfg.ChainN, "chain-n", 200, "resources of the run in declaration order whose per-task latency is measured")
	fs.BoolVar(&cfg.Write, "write", false, "write the results to --results")
	fs.StringVar(&cfg.Results, "results", "", "Markdown file written with --write (default e2e/bench/RESULTS.md)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the work directory (its path is logged)")
	fs.StringVar(&cfg.Root, "root", "", "module root (default: where go env GOMOD points)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "benchrun: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var err error
	if cfg.Sizes, err = parseInts(sizes); err != nil {
		fmt.Fprintf(stderr, "benchrun: --sizes: %v\n", err)
		return 2
	}
	if cfg.Workers, err = parseInts(workers); err != nil {
		fmt.Fprintf(stderr, "benchrun: --workers: %v\n", err)
		return 2
	}
	if cfg.FleetHosts, err = parseInts(fleetHosts); err != nil {
		fmt.Fprintf(stderr, "benchrun: --fleet-hosts: %v\n", err)
		return 2
	}
	for _, m := range strings.Split(modes, ",") {
		cfg.Modes = append(cfg.Modes, Mode(strings.TrimSpace(m)))
	}
	cfg.TimeoutBase, cfg.TimeoutPerResource = *timeoutBase, *timeoutPerN
	if cfg.Root == "" {
		out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
		gomod := strings.TrimSpace(string(out))
		if err != nil || gomod == "" || gomod == "/dev/null" {
			fmt.Fprintln(stderr, "benchrun: not inside the module; give --root")
			return 2
		}
		cfg.Root = filepath.Dir(gomod)
	}
	for _, p := range []*string{&cfg.FleetRoot, &cfg.FleetProfile, &cfg.CPUProfiles} {
		if *p != "" {
			if *p, err = filepath.Abs(*p); err != nil {
				fmt.Fprintf(stderr, "benchrun: %v\n", err)
				return 2
			}
		}
	}
	if cfg.CCM != "" {
		if cfg.CCM, err = filepath.Abs(cfg.CCM); err != nil {
			fmt.Fprintf(stderr, "benchrun: --ccm: %v\n", err)
			return 2
		}
	}
	cfg.Command = "go run ./e2e/bench/cmd/benchrun " + strings.Join(args, " ")
	res, err := runWith(ctx, cfg, stdout, stderr)
	if res == nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, ErrConfig) {
			return 2
		}
		return 1
	}
	res.Markdown(stdout)
	if res.Config.Write {
		if werr := res.WriteFile(res.Config.Results); werr != nil {
			fmt.Fprintln(stderr, werr)
			return 1
		}
		fmt.Fprintf(stderr, "results written to %s\n", res.Config.Results)
	}
	if err != nil {
		fmt.Fprintln(stderr, "benchrun:", err)
		return 1
	}
	if res.failed() {
		return 1
	}
	return 0
}

// failed reports whether any measurement failed.
func (r *Results) failed() bool {
	if len(r.Errors) > 0 {
		return true
	}
	for _, f := range r.Files {
		if f.floorErr != nil {
			return true
		}
		for _, byTool := range f.cells {
			for _, c := range byTool {
				if c.err != nil {
					return true
				}
			}
		}
	}
	if r.Level != nil {
		for _, t := range r.Level.Tools {
			if t.Err != nil {
				return true
			}
		}
	}
	if d := r.Dist; d != nil {
		if d.Err != nil || (d.Latency != nil && d.Latency.Err != nil) {
			return true
		}
		for _, row := range d.Rows {
			if row.Err != nil {
				return true
			}
		}
	}
	if f := r.Fleet; f != nil {
		for _, row := range f.Rows {
			if row.Err != nil {
				return true
			}
		}
	}
	return false
}

// parseInts parses a comma-separated list of integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// Command manifold is the one binary of manifold: CLI, embedded engine,
// and (with their commands) server, coordinator and worker.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"github.com/manifold-run/manifold/internal/cli"
	"github.com/manifold-run/manifold/internal/cueprobe"
	"github.com/manifold-run/manifold/resources"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == resources.ReaperCommand {
		os.Exit(resources.Reaper(os.Stdin))
	}
	if exe, err := os.Executable(); err == nil {
		resources.EnableReaper(exe)
	}
	if len(os.Args) == 3 && os.Args[1] == cueprobe.Command {
		os.Exit(cueprobe.Child(os.Stdin, os.Stdout, os.Args[2]))
	}
	if err := cueprobe.Install(); err != nil {
		fmt.Fprintf(os.Stderr, "manifold: %v\n", err)
		os.Exit(2)
	}
	// MANIFOLD_CPU_PROFILE=FILE writes a CPU profile of the whole command
	// (go tool pprof FILE): how the numbers in e2e/bench/RESULTS.md were
	// explained.
	if path := os.Getenv("MANIFOLD_CPU_PROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			if err := pprof.StartCPUProfile(f); err == nil {
				defer f.Close()
				defer pprof.StopCPUProfile()
			}
		} else {
			fmt.Fprintf(os.Stderr, "manifold: MANIFOLD_CPU_PROFILE: %v\n", err)
		}
	}
	tuneGC(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:])
	stop()
	exit(code)
}

// exit runs the deferred profile flush first.
var exit = func(code int) { pprof.StopCPUProfile(); os.Exit(code) }

// tuneGC makes the garbage collector of the one-shot commands (apply,
// validate, render) collect less often: they live for one run and most of
// what they allocate lives as long, so the default GOGC=100 spent 10–15 %
// of their CPU (pprof) collecting a heap that was about to be freed by
// the exit. A soft memory limit keeps the peak bounded all the same (the
// collector works harder near it). GOGC and GOMEMLIMIT set in the
// environment win; the daemons (server, coordinator, worker) keep the
// defaults.
func tuneGC(args []string) {
	if len(args) == 0 {
		return
	}
	switch args[0] {
	case "apply", "validate", "render":
	default:
		return
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(oneShotGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(oneShotMemoryLimit)
	}
}

// Garbage collection of the one-shot commands (tuneGC).
const (
	oneShotGCPercent   = 400
	oneShotMemoryLimit = 192 << 20
)

// Command manifold is the one binary of manifold: CLI, embedded engine,
// and (with their commands) server, coordinator and worker.
package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/manifold-run/manifold/internal/cli"
	"github.com/manifold-run/manifold/internal/cueprobe"
	"github.com/manifold-run/manifold/resources"
)

func main() {
	entered := time.Now()
	if len(os.Args) == 2 && os.Args[1] == resources.ReaperCommand {
		os.Exit(resources.Reaper(os.Stdin))
	}
	if exe, err := os.Executable(); err == nil {
		resources.EnableReaper(exe)
	}
	if len(os.Args) == 3 && os.Args[1] == cueprobe.Command {
		os.Exit(cueprobe.Child(os.Stdin, os.Stdout, os.Args[2]))
	}
	crashNotExit2()
	if testHook != nil {
		testHook()
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
	// MANIFOLD_MEM_PROFILE=FILE writes a heap profile each time the live
	// heap after a collection passes its highest so far by 5 %: FILE ends
	// up holding the heap at (about) the command's peak, where its RSS is
	// decided (go tool pprof -sample_index=inuse_space FILE).
	if path := os.Getenv("MANIFOLD_MEM_PROFILE"); path != "" {
		profilePeakHeap(path, func(err error) { fmt.Fprintf(os.Stderr, "manifold: MANIFOLD_MEM_PROFILE: %v\n", err) })
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, ProcessExits: true, MainEntered: entered}, os.Args[1:])
	stop()
	exit(code)
}

// crashNotExit2 makes a crash of the process never exit 2, the status of
// an invalid manifest. A panic of the command is recovered and exits 3
// (cli.Run), but the Go runtime ends every fatal error itself with status
// 2, running nothing first: a panic in any other goroutine, a stack
// overflow, an exhausted heap, a concurrent map write. Recovering in every
// goroutine the process starts (ours and our libraries') is impossible, so
// the runtime is told to crash instead (GOTRACEBACK=crash): it prints
// every goroutine's stack and dies by SIGABRT (status 134 in a shell,
// "signal: aborted" to a supervisor), leaving a core dump where the
// system keeps them. The probe and reaper children above keep the default:
// their parents read their status.
func crashNotExit2() { debug.SetTraceback("crash") }

// testHook, set by this package's tests only, runs once the process is
// set up, before the command.
var testHook func()

// exit runs the deferred profile flush first.
var exit = func(code int) { pprof.StopCPUProfile(); os.Exit(code) }

// tuneGC makes the garbage collector of the one-shot commands (apply,
// validate, render) collect less often while their heap is small: they
// live for one run and most of what they allocate lives as long, so the
// default GOGC=100 spent 10–15 % of their CPU (pprof) collecting a heap
// that was about to be freed by the exit. Once the live heap passes
// oneShotLiveHeap (a large manifest) GOGC=100 comes back. A soft memory
// limit keeps the peak RSS of runs up to some 20,000 resources under
// 200 MB (issue 21; docs/performance-compile.md, "Peak RSS"); past three
// quarters of it the limit follows the live heap with a third of it as
// headroom (oneShotLimit), and past oneShotLiftAt it is lifted: a limit
// the live heap reaches makes the collector run without end (a
// 50,000-resource apply took 17 s instead of 5). GOGC
// and GOMEMLIMIT set in the environment win; the daemons (server,
// coordinator, worker) keep the defaults.
func tuneGC(args []string) {
	if len(args) == 0 {
		return
	}
	switch args[0] {
	case "apply", "validate", "render":
	default:
		return
	}
	gogc, limit := os.Getenv("GOGC") == "", os.Getenv("GOMEMLIMIT") == ""
	// Until the first collection the heap grows to oneShotFirstGC: a
	// manifest of a few thousand resources is compiled, run and reported
	// without one (a converged 2,000-file apply collected twice, at 16 and
	// 34 MB, for 5 of its 84 ms).
	first := gogc && limit
	switch {
	case first:
		debug.SetGCPercent(-1)
		debug.SetMemoryLimit(oneShotFirstGC)
	case gogc:
		debug.SetGCPercent(oneShotGCPercent)
	case limit:
		debug.SetMemoryLimit(oneShotMemoryLimit)
	}
	afterEachGC(func() bool {
		live, ok := liveHeap()
		if first {
			first = false
			debug.SetGCPercent(oneShotGCPercent)
			if !ok {
				debug.SetMemoryLimit(oneShotMemoryLimit)
			}
		}
		if !ok {
			return false
		}
		if gogc && live > oneShotLiveHeap {
			debug.SetGCPercent(100)
			gogc = false
		}
		if limit {
			var next int64
			next, limit = oneShotLimit(live)
			debug.SetMemoryLimit(next)
		}
		return gogc || limit
	})
}

// liveHeap is the live heap of the last completed collection; false when
// the runtime does not publish it.
func liveHeap() (uint64, bool) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return s[0].Value.Uint64(), true
}

// Garbage collection of the one-shot commands (tuneGC).
const (
	oneShotGCPercent = 400
	// oneShotFirstGC: the heap's size at the first collection (GOGC off
	// and this soft limit until then).
	oneShotFirstGC  = 64 << 20
	oneShotLiveHeap = 48 << 20
	// oneShotMemoryLimit: the RSS is this plus some 35 MB (the binary's
	// pages, stacks, the collector's own). The converged apply of
	// e2e/bench's 20,000 files peaks at 86 MB live, the first apply at
	// 104 MB at its end, under the 112 MiB at which the limit is lifted
	// (at two thirds, 100 MiB, the first apply lifted it and its heap
	// doubled: 250 MB); 224 MiB let the heap reach 224 MiB.
	oneShotMemoryLimit = 150 << 20
	// oneShotLiftAt: a live heap past it is a manifest too large for
	// 200 MB of RSS at any cost of collection: the limit is lifted and
	// GOGC=100 alone decides.
	oneShotLiftAt = 256 << 20
)

// oneShotLimit is the soft memory limit after a collection that left live
// bytes of heap, and whether it is still tuned: oneShotMemoryLimit while
// the live heap is under three quarters of it; then the live heap and a
// third of it, so a collection comes every third of the live heap
// allocated (GOGC=33) rather than the heap doubling (GOGC=100 after
// oneShotLiveHeap): the first apply of e2e/bench's 20,000 files ends at
// 115–119 MB live while it builds its report, and lifting the limit there
// let its heap reach 232 MB (287 MiB of RSS); past oneShotLiftAt it is
// lifted.
func oneShotLimit(live uint64) (int64, bool) {
	switch {
	case live > oneShotLiftAt:
		return math.MaxInt64, false
	case live > oneShotMemoryLimit/4*3:
		return int64(live + live/3), true
	default:
		return oneShotMemoryLimit, true
	}
}

// profilePeakHeap writes the heap profile to path after each collection
// whose live heap is 5 % above the highest one written so far. The profile
// is that of the last completed cycle, the one whose live heap was read.
func profilePeakHeap(path string, report func(error)) {
	var peak uint64
	afterEachGC(func() bool {
		live, ok := liveHeap()
		if !ok {
			return false
		}
		if live <= peak+peak/20 {
			return true
		}
		peak = live
		f, err := os.Create(path)
		if err == nil {
			err = pprof.Lookup("heap").WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			report(err)
			return false
		}
		return true
	})
}

// afterEachGC calls f after each garbage collection until it returns
// false: a finalizer of an object that becomes garbage at every cycle
// runs f and arms the next one.
func afterEachGC(f func() bool) {
	sentinel := new([16]byte)
	runtime.SetFinalizer(sentinel, func(*[16]byte) {
		if f() {
			afterEachGC(f)
		}
	})
}

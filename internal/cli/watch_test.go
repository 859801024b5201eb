package cli

import (
	"io"
	"math"
	"runtime/debug"
	"testing"
	"time"

	"github.com/manifold-run/manifold/bus"
)

// TestWatchSettle: once the start run is done, apply --watch drops the
// one-shot GC tuning of apply (GOGC=400, 224 MiB) for a long-lived
// process's: GOGC=100 and a soft limit of max(96 MiB, twice the live heap).
// Not parallel: it changes the process's GC settings (restored).
func TestWatchSettle(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	prevPercent := debug.SetGCPercent(400)
	prevLimit := debug.SetMemoryLimit(224 << 20)
	defer func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	}()
	(&watchRun{st: IO{Stdout: io.Discard, Stderr: io.Discard}}).settle()
	if got := debug.SetGCPercent(prevPercent); got != watchGCPercent {
		t.Fatalf("GOGC after settle %d, want %d", got, watchGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got < watchMemoryLimit || got == math.MaxInt64 || got == 224<<20 {
		t.Fatalf("memory limit after settle %d, want at least %d and not apply's", got, watchMemoryLimit)
	}

	// GOGC and GOMEMLIMIT set by the user win.
	t.Setenv("GOGC", "50")
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetGCPercent(50)
	debug.SetMemoryLimit(1 << 30)
	(&watchRun{st: IO{Stdout: io.Discard, Stderr: io.Discard}}).settle()
	if got := debug.SetGCPercent(prevPercent); got != 50 {
		t.Fatalf("GOGC=50 in the environment, %d after settle", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Fatalf("GOMEMLIMIT=1GiB in the environment, %d after settle", got)
	}
}

// TestWatchBusConfig: a watching engine keeps events and task outcomes
// for its longest run and 10 minutes more, not a server's 24h.
func TestWatchBusConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		timeout, want time.Duration
	}{
		{time.Hour, 70 * time.Minute},
		{0, 11 * time.Minute}, // at least a minute of run
		{6 * time.Hour, 6*time.Hour + 10*time.Minute},
	} {
		got := watchBusConfig(bus.Config{MemoryStorage: true}, tc.timeout)
		if got.EventsMaxAge != tc.want || got.ResultsTTL != tc.want || !got.MemoryStorage {
			t.Fatalf("timeout %s: events %s, results %s, memory %v; want %s, %s, true", tc.timeout, got.EventsMaxAge, got.ResultsTTL, got.MemoryStorage, tc.want, tc.want)
		}
	}
}

// TestWatchRunLimit: a convergence run after the start run lifts the idle
// soft memory limit (a storm's run holds more than it: under the limit the
// collector took half the storm's CPU) and puts it back after, from the
// live heap then (twice it; the storm's outcomes stay in the memory store
// for the retention). GOMEMLIMIT set by the user is left alone.
// Not parallel: it changes the process's GC settings (restored).
func TestWatchRunLimit(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	prevPercent := debug.SetGCPercent(-1)
	prevLimit := debug.SetMemoryLimit(-1)
	defer func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	}()
	live := uint64(10 << 20)
	w := &watchRun{st: IO{Stdout: io.Discard, Stderr: io.Discard}, liveHeap: func() uint64 { return live }}
	w.settle()
	if got := debug.SetMemoryLimit(-1); got != watchMemoryLimit {
		t.Fatalf("idle limit with a 10 MiB live heap: %d, want %d", got, watchMemoryLimit)
	}
	if got := debug.SetGCPercent(-1); got != watchGCPercent {
		t.Fatalf("idle GOGC %d, want %d", got, watchGCPercent)
	}
	debug.SetGCPercent(watchGCPercent)
	restore := w.runLimit()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit during a run: %d, want none", got)
	}
	if got := debug.SetGCPercent(-1); got != runGCPercent {
		t.Fatalf("GOGC during a run %d, want %d", got, runGCPercent)
	}
	debug.SetGCPercent(runGCPercent)
	live = 300 << 20 // the run's outcomes are kept
	restore()
	if got := debug.SetMemoryLimit(-1); got != 600<<20 {
		t.Fatalf("limit after a run leaving 300 MiB live: %d, want %d", got, 600<<20)
	}
	if got := debug.SetGCPercent(-1); got != watchGCPercent {
		t.Fatalf("GOGC after a run %d, want %d", got, watchGCPercent)
	}

	// GOMEMLIMIT set by the user: runs leave it as it is.
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30)
	w = &watchRun{st: IO{Stdout: io.Discard, Stderr: io.Discard}}
	w.settle()
	w.runLimit()()
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Fatalf("GOMEMLIMIT=1GiB in the environment, %d after a run", got)
	}
}

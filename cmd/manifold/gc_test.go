package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// TestAfterEachGC: the hook runs after each collection until it returns
// false, then no more.
func TestAfterEachGC(t *testing.T) {
	calls := make(chan int, 16)
	n := 0
	afterEachGC(func() bool {
		n++
		calls <- n
		return n < 3
	})
	deadline := time.After(10 * time.Second)
	for got := 0; got < 3; {
		runtime.GC()
		select {
		case got = <-calls:
		case <-time.After(10 * time.Millisecond): // the finalizer runs after the cycle
		case <-deadline:
			t.Fatalf("the hook ran %d times, want 3", got)
		}
	}
	for range 3 {
		runtime.GC()
	}
	runtime.GC()
	select {
	case got := <-calls:
		t.Fatalf("the hook ran again (%d) after returning false", got)
	default:
	}
}

// TestOneShotLimit: the one-shot soft memory limit stays at its base while
// the live heap is small, follows the live heap with a third of headroom
// past three quarters of it (never below the base), and is lifted for a
// live heap past oneShotLiftAt.
func TestOneShotLimit(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live  uint64
		limit int64
		tuned bool
	}{
		{0, oneShotMemoryLimit, true},
		{80 * mib, oneShotMemoryLimit, true},
		{oneShotMemoryLimit / 4 * 3, oneShotMemoryLimit, true},
		// The first apply of 20,000 files at its end: 119 MB live.
		{119_000_000, 119_000_000 + 119_000_000/3, true},
		{oneShotLiftAt, oneShotLiftAt + oneShotLiftAt/3, true},
		{oneShotLiftAt + 1, math.MaxInt64, false},
	} {
		limit, tuned := oneShotLimit(c.live)
		if limit != c.limit || tuned != c.tuned {
			t.Errorf("oneShotLimit(%d) = %d, %v; want %d, %v", c.live, limit, tuned, c.limit, c.tuned)
		}
		if tuned && limit < oneShotMemoryLimit {
			t.Errorf("oneShotLimit(%d) = %d: under the base %d", c.live, limit, oneShotMemoryLimit)
		}
	}
}

// TestTuneGCFirstCollection: a one-shot command starts with the collector
// off up to a heap of oneShotFirstGC; after its first collection GOGC is
// oneShotGCPercent and the soft limit oneShotLimit's. GOGC or GOMEMLIMIT
// in the environment keep it from starting off.
func TestTuneGCFirstCollection(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	gcPercent := func() int { p := debug.SetGCPercent(0); debug.SetGCPercent(p); return p }
	memLimit := func() int64 { return debug.SetMemoryLimit(-1) }

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	tuneGC([]string{"apply", "m.yaml"})
	if p, l := gcPercent(), memLimit(); p != -1 || l != oneShotFirstGC {
		t.Fatalf("before the first collection: GOGC %d, limit %d; want off (-1), %d", p, l, oneShotFirstGC)
	}
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() != oneShotGCPercent {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d 10s after collections; want %d", gcPercent(), oneShotGCPercent)
		}
		runtime.GC() // the hook runs after a cycle, from the finalizer goroutine
		runtime.Gosched()
	}
	live, _ := liveHeap()
	if want, _ := oneShotLimit(live); memLimit() != want {
		t.Errorf("after the first collection: limit %d, want %d", memLimit(), want)
	}

	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOGC", "200")
	tuneGC([]string{"apply", "m.yaml"})
	if p, l := gcPercent(), memLimit(); p != 100 || l != oneShotMemoryLimit {
		t.Errorf("GOGC set: GOGC %d, limit %d; want the environment's (100 here), %d", p, l, oneShotMemoryLimit)
	}
}

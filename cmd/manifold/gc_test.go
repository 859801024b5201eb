package main

import (
	"math"
	"runtime"
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

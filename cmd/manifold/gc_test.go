package main

import (
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

package coordinator

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFanOutStartsChildrenSideBySide: a fan-out's child runs are started
// fanOutStarts at a time beside its loop (each start is round trips to
// the server), never more; the next waits for one to end; the fold waits
// for the starts in flight; a start asked for once the coordinator stops
// is not run; a run that is not a fan-out opened here is not taken.
func TestFanOutStartsChildrenSideBySide(t *testing.T) {
	var s foldStash
	var wg sync.WaitGroup
	s.open("fan", nil)
	release := make(chan struct{})
	var running, most, done atomic.Int32
	entered := make(chan struct{}, 2*fanOutStarts)
	start := func() {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		entered <- struct{}{}
		<-release
		running.Add(-1)
		done.Add(1)
	}
	ctx := context.Background()
	for range fanOutStarts {
		if !s.startChild(ctx, "fan", &wg, start) {
			t.Fatal("startChild refused a child of an open fan-out")
		}
	}
	deadline := time.After(10 * time.Second)
	for range fanOutStarts {
		select {
		case <-entered:
		case <-deadline:
			t.Fatalf("only %d starts running side by side, want %d", running.Load(), fanOutStarts)
		}
	}
	// One more waits until a start ends.
	extra := make(chan bool)
	go func() { extra <- s.startChild(ctx, "fan", &wg, start) }()
	select {
	case <-extra:
		t.Fatalf("start %d ran while %d were in flight", fanOutStarts+1, fanOutStarts)
	case <-entered:
		t.Fatalf("start %d ran while %d were in flight", fanOutStarts+1, fanOutStarts)
	case <-time.After(50 * time.Millisecond): // waiting, as it should (nothing to wait on for an absence)
	}
	release <- struct{}{}
	select {
	case ok := <-extra:
		if !ok {
			t.Fatal("startChild refused a child of an open fan-out")
		}
	case <-deadline:
		t.Fatal("the next start did not run once one ended")
	}
	select {
	case <-entered:
	case <-deadline:
		t.Fatal("the next start did not run once one ended")
	}
	// The fold (take) waits for the starts in flight.
	taken := make(chan struct{})
	go func() { s.take("fan"); close(taken) }()
	select {
	case <-taken:
		t.Fatal("take returned with starts in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-taken:
	case <-deadline:
		t.Fatal("take did not return once the starts ended")
	}
	if got := done.Load(); got != fanOutStarts+1 {
		t.Fatalf("%d starts ended before take returned, want %d", got, fanOutStarts+1)
	}
	if got := most.Load(); got != fanOutStarts {
		t.Fatalf("at most %d starts ran at once, want %d", got, fanOutStarts)
	}
	wg.Wait()

	// Not a fan-out opened here: the caller starts it itself.
	if s.startChild(ctx, "other", &wg, func() { t.Error("started a child of a run not opened") }) {
		t.Fatal("startChild took a child of a run not opened here")
	}
	// Stopping: a start waiting for its turn is dropped (the coordinator
	// resuming the fan-out starts the child).
	s.open("full", nil)
	block := make(chan struct{})
	for range fanOutStarts {
		s.startChild(ctx, "full", &wg, func() { <-block })
	}
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	if !s.startChild(stopped, "full", &wg, func() { t.Error("started a child while stopping") }) {
		t.Fatal("startChild handed a start back while stopping")
	}
	close(block)
	s.take("full")
	wg.Wait()
}

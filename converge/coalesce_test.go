package converge

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestCoalesceStormGivesFewBatchesEachKeyOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, out := make(chan Hint), make(chan Batch)
	go Coalesce(ctx, CoalesceConfig{Quiet: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond}, in, out)
	const hints, keys = 10000, 1000
	go func() {
		for i := range hints {
			in <- Hint{Key: fmt.Sprint("k", i%keys), Why: "write"}
		}
		close(in)
	}()
	seen := map[string]int{}
	batches, total := 0, 0
	for b := range out {
		batches++
		total += b.Hints
		inBatch := map[string]bool{}
		for _, k := range b.Keys {
			if inBatch[k] {
				t.Fatalf("key %s twice in one batch", k)
			}
			inBatch[k] = true
			seen[k]++
		}
	}
	if total != hints {
		t.Fatalf("batches coalesced %d hints, want %d", total, hints)
	}
	if len(seen) != keys {
		t.Fatalf("%d keys hinted, want %d", len(seen), keys)
	}
	// Read as fast as they come, a storm of 10,000 hints is a handful of
	// batches (one per MaxDelay at most while it lasts), not thousands.
	if batches > 50 {
		t.Fatalf("%d batches for a storm of %d hints", batches, hints)
	}
}

func TestCoalesceSlowReaderJoinsHintsIntoThePendingBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, out := make(chan Hint), make(chan Batch)
	go Coalesce(ctx, CoalesceConfig{Quiet: time.Millisecond, MaxDelay: time.Millisecond}, in, out)
	in <- Hint{Key: "a"}
	// Nobody reads out yet: the batch waits and takes the next hints.
	in <- Hint{Key: "b"}
	in <- Hint{All: true, Why: "event queue overflow"}
	in <- Hint{Key: "a"}
	close(in)
	var got []Batch
	for b := range out {
		got = append(got, b)
	}
	if len(got) != 1 {
		t.Fatalf("got %d batches, want 1: %+v", len(got), got)
	}
	b := got[0]
	if !b.All || len(b.Keys) != 2 || b.Hints != 4 || b.Why[""] != "event queue overflow" {
		t.Fatalf("batch %+v", b)
	}
}

// stormHints sends n keys at once, then one more key every 10 ms for d
// (hints never pause for long), then closes in.
func stormHints(in chan<- Hint, n int, d time.Duration) {
	for i := range n {
		in <- Hint{Key: fmt.Sprint("k", i)}
	}
	for end, i := time.Now().Add(d), 0; time.Now().Before(end); i++ {
		time.Sleep(10 * time.Millisecond)
		in <- Hint{Key: fmt.Sprint("late", i)}
	}
	close(in)
}

// A batch that reaches StormSize keys waits for the storm to pause (Quiet)
// up to StormDelay after its first hint, not MaxDelay: one batch, so one
// repair run, for a storm that lasts longer than MaxDelay.
func TestCoalesceStormWaitsPastMaxDelayForQuiet(t *testing.T) {
	batches := func(stormSize int) []Batch {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		in, out := make(chan Hint), make(chan Batch)
		go Coalesce(ctx, CoalesceConfig{Quiet: 500 * time.Millisecond, MaxDelay: 500 * time.Millisecond, StormSize: stormSize, StormDelay: 20 * time.Second}, in, out)
		go stormHints(in, 100, 2*time.Second)
		var got []Batch
		for b := range out {
			got = append(got, b)
		}
		return got
	}
	if got := batches(100); len(got) != 1 || len(got[0].Keys) < 150 {
		t.Fatalf("storm of 2 s: %d batches; want 1 holding every key", len(got))
	}
	// Below StormSize the batch goes at MaxDelay, as before.
	if got := batches(1000); len(got) < 3 || len(got[0].Keys) < 100 {
		t.Fatalf("no storm: %d batches; want one per MaxDelay (at least 3 in 2 s)", len(got))
	}
}

// A storm's batch goes at StormDelay after its first hint while hints keep
// coming: never starved.
func TestCoalesceStormBatchGoesAtStormDelay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, out := make(chan Hint), make(chan Batch)
	go Coalesce(ctx, CoalesceConfig{Quiet: 500 * time.Millisecond, MaxDelay: 500 * time.Millisecond, StormSize: 10, StormDelay: 2 * time.Second}, in, out)
	start := time.Now()
	go stormHints(in, 10, 8*time.Second)
	b := <-out
	if took := time.Since(start); took < 2*time.Second || took > 7*time.Second {
		t.Fatalf("storm batch went after %v, want StormDelay (2s) while hints go on", took)
	}
	if len(b.Keys) <= 10 {
		t.Fatalf("batch of %d keys, want the storm's first 2 s", len(b.Keys))
	}
	for range out { // let the storm end
	}
}

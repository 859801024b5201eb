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

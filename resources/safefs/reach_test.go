package safefs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/manifold-run/manifold/resources/safefs"
)

// TestReachCache: under a Reach, the files of one directory cost one walk
// from "/" together, and the verdict is the uncached one; a new Reach
// sees a change the old one remembered across.
func TestReachCache(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	open := filepath.Join(base, "open")
	closed := filepath.Join(base, "closed")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx := safefs.WithReach(context.Background(), safefs.NewReach())
	before := safefs.ReachWalks()
	for i := range 100 {
		dir := open
		if i%2 == 1 {
			dir = closed + "/" // cleaned: the same directory
		}
		got := safefs.ReachableByOthersContext(ctx, dir)
		if want := dir == open; got != want {
			t.Fatalf("ReachableByOthersContext(%s) = %v, want %v", dir, got, want)
		}
	}
	if walks := safefs.ReachWalks() - before; walks != 2 {
		t.Fatalf("%d walks for 100 look-ups of 2 directories, want 2", walks)
	}
	// Remembered within the unit of work; a new one sees the change.
	if err := os.Chmod(closed, 0o755); err != nil {
		t.Fatal(err)
	}
	if safefs.ReachableByOthersContext(ctx, closed) {
		t.Error("the cached verdict changed within one Reach")
	}
	if !safefs.ReachableByOthersContext(safefs.WithReach(context.Background(), safefs.NewReach()), closed) {
		t.Error("a new Reach kept the old verdict")
	}
	// Without a Reach, each look-up walks.
	before = safefs.ReachWalks()
	for range 3 {
		safefs.ReachableByOthersContext(context.Background(), open)
	}
	if walks := safefs.ReachWalks() - before; walks != 3 {
		t.Fatalf("%d walks without a cache, want 3", walks)
	}
}

// TestReachCacheLimit: past MaxReachEntries directories, verdicts are
// still right, computed each time.
func TestReachCacheLimit(t *testing.T) {
	base := t.TempDir()
	ctx := safefs.WithReach(context.Background(), safefs.NewReach())
	for i := range safefs.MaxReachEntries {
		safefs.ReachableByOthersContext(ctx, filepath.Join(base, fmt.Sprint(i)))
	}
	extra := filepath.Join(base, "extra")
	before := safefs.ReachWalks()
	for range 2 {
		if safefs.ReachableByOthersContext(ctx, extra) {
			t.Fatal("a missing directory is not reachable")
		}
	}
	if walks := safefs.ReachWalks() - before; walks != 2 {
		t.Fatalf("%d walks past the limit, want 2 (not remembered)", walks)
	}
}

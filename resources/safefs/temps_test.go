package safefs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/manifold-run/manifold/resources/safefs"
)

// TestTempProbeStopsAtFreeSlot: a write with no leftover probes no slot
// (it creates the first, free, at once), not all TempSlots; leftovers of killed writers in
// consecutive slots from 0 are all removed by the next write; one above a
// free slot stays until a write finds the slots below it taken.
func TestTempProbeStopsAtFreeSlot(t *testing.T) {
	dir := t.TempDir()
	d, err := safefs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	before := safefs.TempProbes()
	for range 10 {
		if err := d.WriteFile("app.conf", []byte("x\n"), 0o644, -1, -1); err != nil {
			t.Fatal(err)
		}
	}
	if probes := safefs.TempProbes() - before; probes != 0 {
		t.Fatalf("%d slots probed by 10 writes without leftovers, want 0", probes)
	}

	old := time.Now().Add(-time.Minute)
	stale := func(k int) string {
		p := filepath.Join(dir, safefs.TempName("app.conf", k))
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gone := []string{stale(0), stale(1), stale(2)}
	above := stale(4) // slot 3 free: not reached
	before = safefs.TempProbes()
	if err := d.WriteFile("app.conf", []byte("y\n"), 0o644, -1, -1); err != nil {
		t.Fatal(err)
	}
	if probes := safefs.TempProbes() - before; probes != 4 {
		t.Errorf("%d slots probed with leftovers in 0-2, want 4 (0-3)", probes)
	}
	for _, p := range gone {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("leftover %s not removed (%v)", p, err)
		}
	}
	if _, err := os.Lstat(above); err != nil {
		t.Errorf("leftover above a free slot: %v (the probe stops at slot 3)", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "app.conf")); string(got) != "y\n" {
		t.Fatalf("content %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("%d entries, want the target and slot 4's leftover", len(entries))
	}
}

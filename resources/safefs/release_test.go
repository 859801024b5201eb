package safefs_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-run/manifold/resources/safefs"
)

// heldDeleted lists the descriptors of this process that name a deleted
// file under dir: replaced files still held for release.
func heldDeleted(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir+"/") && strings.HasSuffix(target, " (deleted)") {
			held = append(held, target)
		}
	}
	return held
}

// TestReplacedFilesReleasedInBackground: a write (WriteFile, a Group's
// Commit) returns with its target replaced and durable while the file it
// replaced is still held, released by the releaser (its last reference,
// and the freeing of its blocks, go there), and nothing stays held once
// WaitReleases returns. A new file replaces nothing and holds nothing.
func TestReplacedFilesReleasedInBackground(t *testing.T) {
	safefs.WaitReleases()
	dir := t.TempDir()
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gate := make(chan struct{})
	safefs.SetReleaseHook(func() { <-gate })
	defer safefs.SetReleaseHook(nil)

	if err := safefs.WriteFile(filepath.Join(dir, "f0"), []byte("new"), 0o644, -1, -1); err != nil {
		t.Fatal(err)
	}
	d, err := safefs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var g safefs.Group
	for _, name := range []string{"f1", "f2", "f3"} { // f3 is new
		if err := g.Add(d, name, []byte("new"), 0o644, -1, -1); err != nil {
			t.Fatal(err)
		}
	}
	for i, err := range g.Commit() {
		if err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
	}
	for i := range 4 {
		if b, err := os.ReadFile(filepath.Join(dir, "f"+strconv.Itoa(i))); err != nil || string(b) != "new" {
			t.Fatalf("f%d: %q %v", i, b, err)
		}
	}
	held := heldDeleted(t, dir)
	if len(held) != 3 {
		t.Fatalf("held %v, want the 3 replaced files", held)
	}
	if n := safefs.PendingReleases(); n != 3 {
		t.Fatalf("pending %d, want 3", n)
	}
	close(gate)
	safefs.WaitReleases()
	if held := heldDeleted(t, dir); len(held) != 0 {
		t.Fatalf("still held after WaitReleases: %v", held)
	}
	if n := safefs.PendingReleases(); n != 0 {
		t.Fatalf("pending %d after WaitReleases", n)
	}
}

// TestReleaseLimit: at its bound the releaser takes no more; a write past
// it releases the file it replaced itself (at once: not held), and every
// write still succeeds.
func TestReleaseLimit(t *testing.T) {
	safefs.WaitReleases()
	defer safefs.SetReleaseLimit(safefs.SetReleaseLimit(2))
	dir := t.TempDir()
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	entered := make(chan struct{}, 8)
	gate := make(chan struct{})
	safefs.SetReleaseHook(func() { entered <- struct{}{}; <-gate })
	defer safefs.SetReleaseHook(nil)
	write := func(i int) {
		t.Helper()
		if err := safefs.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), []byte("new"), 0o644, -1, -1); err != nil {
			t.Fatal(err)
		}
	}
	write(0)
	select { // the releaser holds f0's, and is stopped on it
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the releaser did not start")
	}
	inline0 := safefs.InlineReleases()
	for i := 1; i < 5; i++ {
		write(i)
	}
	if got := safefs.InlineReleases() - inline0; got != 3 {
		t.Fatalf("%d released by their writer, want 3 (f2, f3, f4: the releaser holds 2, f0 it closes and f1)", got)
	}
	if held := heldDeleted(t, dir); len(held) != 2 {
		t.Fatalf("held %v, want 2", held)
	}
	if n := safefs.PendingReleases(); n != 2 {
		t.Fatalf("pending %d, want 2", n)
	}
	for i := range 5 {
		if b, err := os.ReadFile(filepath.Join(dir, "f"+strconv.Itoa(i))); err != nil || string(b) != "new" {
			t.Fatalf("f%d: %q %v", i, b, err)
		}
	}
	close(gate)
	safefs.WaitReleases()
	if held := heldDeleted(t, dir); len(held) != 0 {
		t.Fatalf("still held: %v", held)
	}
}

// TestGroupRenamesSyncedOnce: with SyncFS a Commit makes its files and
// then its renames durable with one syncfs each, whatever the number of
// directories, and fsyncs no directory; with SyncEach it fsyncs each
// directory once.
func TestGroupRenamesSyncedOnce(t *testing.T) {
	for _, tc := range []struct {
		mode             safefs.SyncMode
		dirSyncs, fsSync int64
	}{{safefs.SyncFS, 0, 2}, {safefs.SyncEach, 4, 0}} {
		t.Run(string(tc.mode), func(t *testing.T) {
			var g safefs.Group
			safefs.SetGroupSync(&g, tc.mode)
			dirs := []string{t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()}
			open := make([]*safefs.Dir, len(dirs))
			for i, dir := range dirs {
				d, err := safefs.OpenDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				open[i] = d
			}
			for i := range 12 {
				if err := g.Add(open[i%4], "f"+strconv.Itoa(i), []byte("new"), 0o644, -1, -1); err != nil {
					t.Fatal(err)
				}
			}
			d0, f0 := safefs.Syncs()
			for i, err := range g.Commit() {
				if err != nil {
					t.Fatalf("file %d: %v", i, err)
				}
			}
			d1, f1 := safefs.Syncs()
			if d1-d0 != tc.dirSyncs || f1-f0 != tc.fsSync {
				t.Fatalf("%d directory fsyncs and %d syncfs, want %d and %d", d1-d0, f1-f0, tc.dirSyncs, tc.fsSync)
			}
			for i := range 12 {
				if b, err := os.ReadFile(filepath.Join(dirs[i%4], "f"+strconv.Itoa(i))); err != nil || string(b) != "new" {
					t.Fatalf("f%d: %q %v", i, b, err)
				}
			}
		})
	}
}

// TestReleasesHeldWhileWritesGoOn: while writes come closer together than
// ReleaseQuiet (here the releaser's clock stands still: always), the
// replaced files stay held, none freed, up to half the bound; at half the
// bound the releaser frees what it holds, and WaitReleases frees
// everything at once rather than wait for the writes to pause.
func TestReleasesHeldWhileWritesGoOn(t *testing.T) {
	safefs.WaitReleases()
	now := time.Now()
	safefs.SetReleaseClock(func() time.Time { return now })
	defer safefs.SetReleaseClock(nil)
	defer safefs.SetReleaseLimit(safefs.SetReleaseLimit(8))
	closed := make(chan struct{}, 16)
	safefs.SetReleaseHook(func() { closed <- struct{}{} })
	defer safefs.SetReleaseHook(nil)
	dir := t.TempDir()
	write := func(i int) {
		t.Helper()
		p := filepath.Join(dir, "f"+strconv.Itoa(i))
		if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := safefs.WriteFile(p, []byte("new"), 0o644, -1, -1); err != nil {
			t.Fatal(err)
		}
	}
	inline0 := safefs.InlineReleases()
	for i := range 3 {
		write(i)
	}
	if n := safefs.PendingReleases(); n != 3 || len(closed) != 0 {
		t.Fatalf("pending %d, closed %d; want 3 held, none closed", n, len(closed))
	}
	if held := heldDeleted(t, dir); len(held) != 3 {
		t.Fatalf("held %v, want 3", held)
	}
	write(3) // half the bound: the releaser frees the 4 it holds
	for range 4 {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the releaser did not free its files at half its bound")
		}
	}
	write(4)
	write(5)
	safefs.WaitReleases() // not held back: returns with all freed
	if held := heldDeleted(t, dir); len(held) != 0 {
		t.Fatalf("still held after WaitReleases: %v", held)
	}
	if len(closed) != 2 || safefs.InlineReleases() != inline0 {
		t.Fatalf("closed %d more, %d inline; want 2 and 0", len(closed), safefs.InlineReleases()-inline0)
	}
}

// TestReleasesHeldUpToMaxHeldBytes: a replaced file of MaxHeldBytes of
// blocks is not held back, however close the writes (a stopped clock):
// the releaser frees it, and the small one held before it, at once.
func TestReleasesHeldUpToMaxHeldBytes(t *testing.T) {
	safefs.WaitReleases()
	now := time.Now()
	safefs.SetReleaseClock(func() time.Time { return now })
	defer safefs.SetReleaseClock(nil)
	closed := make(chan struct{}, 4)
	safefs.SetReleaseHook(func() { closed <- struct{}{} })
	defer safefs.SetReleaseHook(nil)
	dir := t.TempDir()
	small, big := filepath.Join(dir, "small"), filepath.Join(dir, "big")
	if err := os.WriteFile(small, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, safefs.MaxHeldBytes); err != nil {
		f.Close()
		t.Skipf("fallocate: %v", err)
	}
	f.Close()
	if err := safefs.WriteFile(small, []byte("new"), 0o644, -1, -1); err != nil {
		t.Fatal(err)
	}
	if n := safefs.PendingReleases(); n != 1 || len(closed) != 0 {
		t.Fatalf("pending %d, closed %d; want the small one held", n, len(closed))
	}
	if err := safefs.WriteFile(big, []byte("new"), 0o644, -1, -1); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the releaser held a replaced file of MaxHeldBytes")
		}
	}
	safefs.WaitReleases()
	if held := heldDeleted(t, dir); len(held) != 0 {
		t.Fatalf("still held: %v", held)
	}
}

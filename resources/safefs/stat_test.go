package safefs_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/manifold-run/manifold/resources/safefs"
)

// sameStat compares what a caller of AddStat compares.
func sameStat(a, b *syscall.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mode == b.Mode &&
		a.Uid == b.Uid && a.Gid == b.Gid && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

// TestWriteStats: Group.AddStat and Dir.WriteFileStat give the fstat of
// the file renamed over the target, equal to an lstat of the target
// after (the rename's change time included); a write that failed leaves
// a zero stat, whatever the stat held before.
func TestWriteStats(t *testing.T) {
	dir := t.TempDir()
	d, err := safefs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil { // a rename over it fails
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	lstat := func(name string) *syscall.Stat_t {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t)
	}

	var g safefs.Group
	var ok, bad syscall.Stat_t
	bad.Ino = 42 // stale: must be zeroed
	if err := g.AddStat(d, "a", []byte("data a\n"), 0o640, -1, -1, &ok); err != nil {
		t.Fatal(err)
	}
	if err := g.AddStat(d, "sub", []byte("data\n"), 0o640, -1, -1, &bad); err != nil {
		t.Fatal(err)
	}
	if ok.Ino != 0 {
		t.Fatal("stat filled before the commit")
	}
	errs := g.Commit()
	if errs[0] != nil || errs[1] == nil {
		t.Fatalf("commit errors %v", errs)
	}
	if st := lstat("a"); ok.Ino == 0 || !sameStat(&ok, st) || ok.Size != 7 || ok.Mode&0o777 != 0o640 {
		t.Fatalf("group stat %+v, lstat %+v", ok, st)
	}
	if bad != (syscall.Stat_t{}) {
		t.Fatalf("failed write's stat %+v, want zero", bad)
	}

	var one syscall.Stat_t
	if err := d.WriteFileStat("b", []byte("data b\n"), 0o600, -1, -1, &one); err != nil {
		t.Fatal(err)
	}
	if st := lstat("b"); one.Ino == 0 || !sameStat(&one, st) {
		t.Fatalf("write stat %+v, lstat %+v", one, st)
	}
	if err := d.WriteFileStat("sub", []byte("data\n"), 0o600, -1, -1, &one); err == nil {
		t.Fatal("write over a directory succeeded")
	}
	if one != (syscall.Stat_t{}) {
		t.Fatalf("failed write's stat %+v, want zero", one)
	}
}

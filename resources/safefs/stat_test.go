package safefs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// TestLstatIsOSLstat: Dir.Lstat (an fstatat on the directory) describes
// every kind of entry as os.Lstat does: name, size, mode with its type
// and special bits, modification time and the stat_t; a missing name is
// fs.ErrNotExist naming the path.
func TestLstatIsOSLstat(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "file"), []byte("hello"), 0o640))
	must(os.WriteFile(filepath.Join(dir, "special"), nil, 0o755))
	must(os.Chmod(filepath.Join(dir, "special"), 0o755|os.ModeSetuid|os.ModeSetgid|os.ModeSticky))
	must(os.Mkdir(filepath.Join(dir, "dir"), 0o750))
	must(os.Symlink("file", filepath.Join(dir, "link")))
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	d, err := safefs.OpenDir(dir)
	must(err)
	defer d.Close()
	for _, name := range []string{"file", "special", "dir", "link", "fifo"} {
		want, err := os.Lstat(filepath.Join(dir, name))
		must(err)
		got, err := d.Lstat(name)
		must(err)
		if got.Name() != want.Name() || got.Size() != want.Size() || got.Mode() != want.Mode() ||
			got.IsDir() != want.IsDir() || !got.ModTime().Equal(want.ModTime()) {
			t.Errorf("%s: Lstat %q %d %v %v %v, os.Lstat %q %d %v %v %v", name,
				got.Name(), got.Size(), got.Mode(), got.IsDir(), got.ModTime(),
				want.Name(), want.Size(), want.Mode(), want.IsDir(), want.ModTime())
		}
		if !sameStat(got.Sys().(*syscall.Stat_t), want.Sys().(*syscall.Stat_t)) {
			t.Errorf("%s: stat_t %+v, os.Lstat %+v", name, got.Sys(), want.Sys())
		}
	}
	_, err = d.Lstat("missing")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(dir, "missing")) {
		t.Errorf("missing: %v, want not exist naming %s", err, filepath.Join(dir, "missing"))
	}
}

// TestReadFileWholeFile: ReadFile reads all a file holds, whether or not
// its checked size is known, and at most limit bytes.
func TestReadFileWholeFile(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, 4095, 4096, 70000} {
		body := strings.Repeat("x", n)
		name := fmt.Sprintf("f%d", n)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := safefs.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := d.Lstat(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, checked := range []fs.FileInfo{fi, nil} {
			got, err := d.ReadFile(name, checked, 1<<20)
			if err != nil || string(got) != body {
				t.Errorf("%s (checked %v): %d bytes, %v; want %d", name, checked != nil, len(got), err, n)
			}
		}
		if got, err := d.ReadFile(name, fi, 10); err != nil || len(got) != min(n, 10) {
			t.Errorf("%s limit 10: %d bytes, %v", name, len(got), err)
		}
		d.Close()
	}
}

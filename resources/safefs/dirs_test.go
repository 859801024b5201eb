package safefs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/manifold-run/manifold/resources/safefs"
)

// TestDirsReuse: files of one directory get the same kept Dir; Close of
// it leaves it usable; the cache's Close closes it.
func TestDirsReuse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dirs := safefs.NewDirs()
	ctx := safefs.WithDirs(context.Background(), dirs)
	d1, n1, err := safefs.OpenParentContext(ctx, filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	d1.Close()
	d2, n2, err := safefs.OpenParentContext(ctx, filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if d1 != d2 || n1 != "a" || n2 != "b" || dirs.Len() != 1 {
		t.Fatalf("not reused: %p %p %s %s, %d kept", d1, d2, n1, n2, dirs.Len())
	}
	if err := d2.WriteFile("b", []byte("x"), 0o644, -1, -1); err != nil {
		t.Fatalf("write through a kept Dir closed by a caller: %v", err)
	}
	if err := dirs.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d2.Lstat("b"); err == nil {
		t.Fatal("a kept Dir still open after the cache's Close")
	}
	// Without a cache in ctx: OpenParent's own Dir.
	d3, _, err := safefs.OpenParentContext(context.Background(), filepath.Join(dir, "c"))
	if err != nil {
		t.Fatal(err)
	}
	d3.Close()
	if _, err := d3.Lstat("b"); err == nil {
		t.Fatal("an uncached Dir still open after Close")
	}
}

// TestDirsFollowPathChanges: a kept directory is not handed out once its
// path leads elsewhere: renamed and replaced, removed, or replaced by a
// link another user owns (refused, as a fresh walk refuses it).
func TestDirsFollowPathChanges(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	app := filepath.Join(base, "app")
	// Each use is DirsRecheck after the last: every one checks the path.
	var clock time.Duration
	writeIn := appWriter(t, app, func() time.Duration { clock += safefs.DirsRecheck; return clock })
	write := func(content string) error { return writeIn("conf", content) }
	if err := write("1"); err != nil {
		t.Fatal(err)
	}
	// Renamed aside and replaced by a new directory: the write lands in
	// the new one.
	if err := os.Rename(app, app+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := write("2"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(app, "conf")); string(b) != "2" {
		t.Fatalf("new directory: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(app+".old", "conf")); string(b) != "1" {
		t.Fatalf("old directory written again: %q", b)
	}
	// Removed: the walk's error, not a write into the removed directory.
	if err := os.RemoveAll(app); err != nil {
		t.Fatal(err)
	}
	if err := write("3"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("write into a removed directory: %v", err)
	}
	if os.Getuid() != 0 {
		return
	}
	// Replaced by a link of nobody's: refused like any walk through it.
	secret := filepath.Join(base, "secret")
	mkdir(t, secret, 0o700, 0)
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := write("4"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(app, app+".gone"); err != nil {
		t.Fatal(err)
	}
	symlink(t, secret, app, nobody)
	if err := write("5"); !errors.Is(err, safefs.ErrUntrustedLink) {
		t.Fatalf("write through nobody's link after caching: %v", err)
	}
	if entries, _ := os.ReadDir(secret); len(entries) != 0 {
		t.Fatalf("written into the link's target: %v", entries)
	}
}

// appWriter creates the directory app and returns a writer of files in
// it through a Dirs (closed with the test) whose clock of rechecks is now.
func appWriter(t *testing.T, app string, now func() time.Duration) func(name, content string) error {
	t.Helper()
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	dirs := safefs.NewDirs()
	t.Cleanup(func() { dirs.Close() })
	safefs.SetDirsClock(dirs, now)
	ctx := safefs.WithDirs(context.Background(), dirs)
	return func(name, content string) error {
		d, n, err := safefs.OpenParentContext(ctx, filepath.Join(app, name))
		if err != nil {
			return err
		}
		defer d.Close()
		return d.WriteFile(n, []byte(content), 0o644, -1, -1)
	}
}

// TestDirsRecheckWindow: within DirsRecheck of its last check a kept
// directory is handed out without a stat of its path (a directory renamed
// aside meanwhile is still written into: the very directory the path led
// to, reached safely); past it the path is checked again and followed.
func TestDirsRecheckWindow(t *testing.T) {
	t.Parallel()
	app := filepath.Join(t.TempDir(), "app")
	var clock time.Duration
	writeIn := appWriter(t, app, func() time.Duration { return clock })
	write := func(name, content string) {
		t.Helper()
		if err := writeIn(name, content); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "1")
	if err := os.Rename(app, app+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}
	clock += safefs.DirsRecheck - 1
	write("b", "2")
	if b, err := os.ReadFile(filepath.Join(app+".old", "b")); err != nil || string(b) != "2" {
		t.Fatalf("within the window: want the kept directory written, got %q, %v", b, err)
	}
	clock += safefs.DirsRecheck
	write("c", "3")
	if b, err := os.ReadFile(filepath.Join(app, "c")); err != nil || string(b) != "3" {
		t.Fatalf("past the window: want the new directory written, got %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(app+".old", "c")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("past the window, the old directory written: %v", err)
	}
}

// TestDirsLimit: a cache keeps MaxCachedDirs directories; past it, Dirs
// of the caller's own are handed out (closed by the caller), and writes
// through them work.
func TestDirsLimit(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dirs := safefs.NewDirs()
	defer dirs.Close()
	ctx := safefs.WithDirs(context.Background(), dirs)
	for i := range safefs.MaxCachedDirs + 2 {
		sub := filepath.Join(base, strconv.Itoa(i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		d, name, err := safefs.OpenParentContext(ctx, filepath.Join(sub, "f"))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.WriteFile(name, []byte("x"), 0o644, -1, -1); err != nil {
			t.Fatal(err)
		}
		d.Close()
		if want := min(i+1, safefs.MaxCachedDirs); dirs.Len() != want {
			t.Fatalf("after %d directories: %d kept, want %d", i+1, dirs.Len(), want)
		}
	}
}

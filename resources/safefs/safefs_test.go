package safefs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/manifold-run/manifold/resources/safefs"
)

const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to hand directories and links to nobody")
	}
}

func mkdir(t *testing.T, path string, mode os.FileMode, uid int) {
	t.Helper()
	if err := os.Mkdir(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string, uid int) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// TestUntrustedParentLink: a link on the way owned by another user is
// refused, naming it; links of root (or this process's user) are followed.
func TestUntrustedParentLink(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := t.TempDir()
	secret := filepath.Join(base, "secret")
	mkdir(t, secret, 0o700, 0)
	home := filepath.Join(base, "home")
	mkdir(t, home, 0o755, nobody)
	symlink(t, secret, filepath.Join(home, "app"), nobody)
	symlink(t, secret, filepath.Join(base, "rootlink"), 0)

	err := safefs.WriteFile(filepath.Join(home, "app", "config.json"), []byte("x"), 0o644, -1, -1)
	var le *safefs.LinkError
	if !errors.As(err, &le) || !errors.Is(err, safefs.ErrUntrustedLink) || le.Link != filepath.Join(home, "app") || le.UID != nobody {
		t.Fatalf("write through nobody's link: %v", err)
	}
	if entries, _ := os.ReadDir(secret); len(entries) != 0 {
		t.Fatalf("written into the link's target: %v", entries)
	}
	if err := safefs.WriteFile(filepath.Join(base, "rootlink", "ok"), []byte("x"), 0o600, -1, -1); err != nil {
		t.Fatalf("write through root's link: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(secret, "ok")); err != nil || string(b) != "x" {
		t.Fatalf("through root's link: %q %v", b, err)
	}
	// A relative link to ".." of a directory of its owner's is followed
	// the kernel's way only when trusted: here nobody's again, refused.
	symlink(t, "../secret", filepath.Join(home, "up"), nobody)
	if _, err := safefs.OpenDir(filepath.Join(home, "up")); !errors.Is(err, safefs.ErrUntrustedLink) {
		t.Fatalf("open nobody's relative link: %v", err)
	}
}

// TestLinkAtName: WriteFile replaces a link at the name (the target stays
// as it was); Open and Sub refuse it.
func TestLinkAtName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	d, err := safefs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, _, err := d.Open("link", os.O_RDONLY, nil); !errors.Is(err, safefs.ErrSymlink) {
		t.Fatalf("open link: %v", err)
	}
	if _, err := d.Sub("link"); !errors.Is(err, safefs.ErrSymlink) {
		t.Fatalf("sub link: %v", err)
	}
	if err := d.WriteFile("link", []byte("new"), 0o644, -1, -1); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "secret" {
		t.Fatalf("target now %q", b)
	}
	fi, err := os.Lstat(filepath.Join(dir, "link"))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Fatalf("link after write: %v %v", fi, err)
	}
}

func TestReadableByOthers(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	// t.TempDir's parent is 0700: open it, as /etc is.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	open := filepath.Join(base, "open")
	closed := filepath.Join(base, "closed")
	for dir, mode := range map[string]os.FileMode{open: 0o755, closed: 0o700} {
		if err := os.Mkdir(dir, mode); err != nil {
			t.Fatal(err)
		}
		for name, m := range map[string]os.FileMode{"public": 0o644, "private": 0o600} {
			if err := os.WriteFile(filepath.Join(dir, name), nil, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Symlink(closed, filepath.Join(base, "via")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want bool
	}{
		{filepath.Join(open, "public"), true},
		{filepath.Join(open, "private"), false},
		{filepath.Join(closed, "public"), false},
		{filepath.Join(base, "via", "public"), false},
		{filepath.Join(open, "missing"), false},
	} {
		if got := safefs.ReadableByOthers(tc.path); got != tc.want {
			t.Errorf("ReadableByOthers(%s) = %v, want %v", tc.path, got, tc.want)
		}
	}
	if !safefs.ReachableByOthers(open) || safefs.ReachableByOthers(closed) || safefs.ReachableByOthers(filepath.Join(base, "via")) {
		t.Error("ReachableByOthers: want open only")
	}
}

// TestLock: holders of one name's lock run one at a time.
func TestLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := safefs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	unlock, err := d.Lock(context.Background(), "doc.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := d.Lock(ctx, "doc.json"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while held: %v", err)
	}
	got := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		u, err := d.Lock(context.Background(), "doc.json")
		if err == nil {
			u()
		}
		got <- err
	})
	unlock()
	wg.Wait()
	if err := <-got; err != nil {
		t.Fatalf("lock after release: %v", err)
	}
}

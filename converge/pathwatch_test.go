package converge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manifold-run/manifold/resources"
)

type watchBundle struct {
	t     *testing.T
	pw    *PathWatcher
	hints chan Hint
}

func setupWatch(t *testing.T) *watchBundle {
	t.Helper()
	hints := make(chan Hint, 1024)
	pw, err := NewPathWatcher(hints)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pw.Close() })
	return &watchBundle{t: t, pw: pw, hints: hints}
}

func (b *watchBundle) set(key string, targets ...resources.WatchTarget) {
	b.t.Helper()
	if err := b.pw.Set(key, targets); err != nil {
		b.t.Fatal(err)
	}
}

// expect waits for a hint of key whose reason contains why, skipping
// others; it fails after a deadline.
func (b *watchBundle) expect(key, why string) Hint {
	b.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case h := <-b.hints:
			if h.Key == key && strings.Contains(h.Why, why) {
				return h
			}
		case <-deadline:
			b.t.Fatalf("no hint for %s (%q) within 5s", key, why)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestPathWatcherHintsEveryKindOfDrift(t *testing.T) {
	b := setupWatch(t)
	dir := t.TempDir()
	f := filepath.Join(dir, "app.conf")
	must(t, os.WriteFile(f, []byte("a"), 0o644))
	b.set("file#app", resources.WatchTarget{Path: f})

	must(t, os.WriteFile(f, []byte("b"), 0o644))
	b.expect("file#app", "app.conf")

	must(t, os.Chmod(f, 0o600))
	b.expect("file#app", "chmod "+f)

	other := filepath.Join(dir, "new")
	must(t, os.WriteFile(other, []byte("c"), 0o644))
	must(t, os.Rename(other, f))
	b.expect("file#app", "create "+f)

	must(t, os.Remove(f))
	b.expect("file#app", "remove "+f)

	must(t, os.Symlink("/etc/shadow", f))
	b.expect("file#app", "create "+f)
}

func TestPathWatcherIgnoresOtherNamesAndRemovedKeys(t *testing.T) {
	b := setupWatch(t)
	dir := t.TempDir()
	a, c := filepath.Join(dir, "a"), filepath.Join(dir, "c")
	b.set("a", resources.WatchTarget{Path: a})
	b.set("c", resources.WatchTarget{Path: c})
	if n := b.pw.Watched(); n != 1 {
		t.Fatalf("two files of one directory hold %d watches, want 1", n)
	}
	b.pw.Remove("a")
	must(t, os.WriteFile(filepath.Join(dir, "unmanaged"), nil, 0o644))
	must(t, os.WriteFile(a, nil, 0o644))
	must(t, os.WriteFile(c, nil, 0o644))
	// Events come in order: the first hint is c's.
	select {
	case h := <-b.hints:
		if h.Key != "c" {
			t.Fatalf("first hint %+v, want c's (a removed, unmanaged not watched)", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no hint for c")
	}
	b.pw.Remove("c")
	if n := b.pw.Watched(); n != 0 {
		t.Fatalf("%d watches left after every key was removed", n)
	}
}

func TestPathWatcherFollowsMissingDirectories(t *testing.T) {
	b := setupWatch(t)
	root := t.TempDir()
	f := filepath.Join(root, "srv", "app", "app.conf")
	b.set("f", resources.WatchTarget{Path: f})
	must(t, os.Mkdir(filepath.Join(root, "srv"), 0o755))
	b.expect("f", "create "+filepath.Join(root, "srv"))
	must(t, os.Mkdir(filepath.Join(root, "srv", "app"), 0o755))
	b.expect("f", "create "+filepath.Join(root, "srv", "app"))
	must(t, os.WriteFile(f, []byte("x"), 0o644))
	b.expect("f", "create "+f)

	// The directory goes away and comes back: still watched.
	must(t, os.RemoveAll(filepath.Join(root, "srv")))
	b.expect("f", "remove")
	must(t, os.MkdirAll(filepath.Join(root, "srv", "app"), 0o755))
	// The directories came back faster than the watcher followed them
	// (it hints f at each step, so a check then sees the drift). Once it
	// has followed, a write of f is hinted by name.
	deadline := time.Now().Add(5 * time.Second)
	for {
		must(t, os.WriteFile(f, []byte("y"), 0o644))
		if b.within(200*time.Millisecond, "f", f) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("writes of f not hinted after its directories came back")
		}
	}
}

// within reports whether a hint of key naming why came within d.
func (b *watchBundle) within(d time.Duration, key, why string) bool {
	timeout := time.After(d)
	for {
		select {
		case h := <-b.hints:
			if h.Key == key && strings.HasSuffix(h.Why, " "+why) {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

func TestPathWatcherTree(t *testing.T) {
	b := setupWatch(t)
	root := filepath.Join(t.TempDir(), "site")
	must(t, os.MkdirAll(filepath.Join(root, "a", "b"), 0o755))
	b.set("scaffold#site", resources.WatchTarget{Path: root, Tree: true})
	deep := filepath.Join(root, "a", "b", "index.html")
	must(t, os.WriteFile(deep, []byte("x"), 0o644))
	b.expect("scaffold#site", deep)
	// A directory made inside the tree is watched too.
	must(t, os.Mkdir(filepath.Join(root, "new"), 0o755))
	b.expect("scaffold#site", "create "+filepath.Join(root, "new"))
	inNew := filepath.Join(root, "new", "f")
	must(t, os.WriteFile(inNew, nil, 0o644))
	b.expect("scaffold#site", inNew)
}

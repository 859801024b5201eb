package converge

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// checkWatches fails the test unless every directory the watcher counts
// as watched holds a watch in fsnotify (the kernel's events would reach
// it), and says where key hangs.
func (b *watchBundle) checkWatches(key string) []entry {
	b.t.Helper()
	held := map[string]bool{}
	for _, d := range b.pw.w.WatchList() {
		held[d] = true
	}
	b.pw.mu.Lock()
	defer b.pw.mu.Unlock()
	for d := range b.pw.names {
		if !held[d] {
			b.t.Errorf("%s counted as watched, fsnotify holds no watch of it (holds %v)", d, held)
		}
	}
	for d := range b.pw.inTree {
		if !held[d] {
			b.t.Errorf("%s (tree) counted as watched, fsnotify holds no watch of it", d)
		}
	}
	if len(b.pw.unsettled) > 0 {
		b.t.Errorf("unsettled keys left: %v", b.pw.unsettled)
	}
	return slices.Clone(b.pw.entries[key])
}

// settleWithin bounds how long a watch may take to hold again after its
// directories stop changing: a key the churn left unsettled waits for its
// next retry, up to retryMax away, and the events before it are handled
// meanwhile (a loaded run of the suite left one unwatched for more than
// the 5 s these waits had).
const settleWithin = retryMax + 5*time.Second

// chmodHinted changes f's mode until a hint of key names that chmod, and
// fails after settleWithin. The watcher may still be handling the events
// before it (a directory made: its watch is added when its create event
// is handled, so a chmod made before that has no event; the hint of that
// create stands for it), or waiting to retry a key the churn left
// unsettled: once a chmod is hinted by name, every earlier event was
// handled and the watch holds.
func (b *watchBundle) chmodHinted(key, f string) {
	b.t.Helper()
	deadline := time.Now().Add(settleWithin)
	for mode := os.FileMode(0o600); ; mode ^= 0o040 {
		must(b.t, os.Chmod(f, mode))
		for wait := time.After(200 * time.Millisecond); ; {
			select {
			case h := <-b.hints:
				if h.Key == key && h.Why == "chmod "+f {
					return
				}
				continue
			case <-wait:
			}
			break
		}
		if time.Now().After(deadline) {
			b.pw.mu.Lock()
			unsettled, backoff := maps.Clone(b.pw.unsettled), b.pw.backoff
			b.pw.mu.Unlock()
			b.t.Fatalf("chmod of %s not hinted within %s (unsettled %v, next retry within %s)", f, settleWithin, unsettled, backoff)
		}
	}
}

// checked waits until hints of the keys, each followed by a read of its
// file (what a check does), have seen at least want in every file;
// it fails after settleWithin.
func (b *watchBundle) checked(files map[string]string, want int) {
	b.t.Helper()
	seen := map[string]int{}
	deadline := time.After(settleWithin)
	for {
		done := true
		for k := range files {
			if seen[k] < want {
				done = false
			}
		}
		if done {
			return
		}
		select {
		case h := <-b.hints:
			if h.All {
				b.t.Fatalf("hint for all: %s", h.Why)
			}
			f, ok := files[h.Key]
			if !ok {
				b.t.Fatalf("hint of unknown key %+v", h)
			}
			data, err := os.ReadFile(f)
			if err != nil {
				continue // not there (yet): a later hint reads it
			}
			if n, err := strconv.Atoi(string(data)); err == nil && n > seen[h.Key] {
				seen[h.Key] = n
			}
		case <-deadline:
			b.pw.mu.Lock()
			b.t.Logf("watched: %v; unsettled: %v", b.pw.names, b.pw.unsettled)
			b.pw.mu.Unlock()
			b.t.Logf("fsnotify holds: %v", b.pw.w.WatchList())
			b.t.Fatalf("write %d not hinted within %s: checks after hints saw %v", want, settleWithin, seen)
		}
	}
}

// The directory of two watched files is removed and made again, in
// three ways, hundreds of times in a row, and both files are written
// after each time: every write is followed by a hint whose check sees it
// (a lost watch would leave the next writes unhinted), and at the end the
// watcher hangs from the directory itself and holds a watch of it.
func TestPathWatcherRecreatedDirectoryHintsEveryWrite(t *testing.T) {
	b := setupWatch(t)
	root := t.TempDir()
	srv := filepath.Join(root, "srv")
	dir := filepath.Join(srv, "app")
	files := map[string]string{"f": filepath.Join(dir, "app.conf"), "g": filepath.Join(dir, "g.conf")}
	b.set("f", resources.WatchTarget{Path: files["f"]})
	b.set("g", resources.WatchTarget{Path: files["g"]})
	const rounds = 300
	for i := 1; i <= rounds; i++ {
		switch i % 3 {
		case 0: // the whole tree
			must(t, os.RemoveAll(srv))
			must(t, os.MkdirAll(dir, 0o755))
		case 1: // the directory itself
			must(t, os.RemoveAll(dir))
			must(t, os.MkdirAll(dir, 0o755))
		case 2: // renamed away, a new one in its place, the old one removed
			old := filepath.Join(root, "old")
			must(t, os.Rename(srv, old))
			must(t, os.MkdirAll(dir, 0o755))
			must(t, os.RemoveAll(old))
		}
		for _, f := range files {
			must(t, os.WriteFile(f, []byte(strconv.Itoa(i)), 0o644))
		}
		b.checked(files, i)
	}
	// At rest, a chmod (no other step makes one) is hinted by its own
	// name: the watch is the directory's, not a left-over of the churn.
	b.chmodHinted("f", files["f"])
	for _, key := range []string{"f", "g"} {
		if got, want := b.checkWatches(key), []entry{{dir, filepath.Base(files[key])}}; !slices.Equal(got, want) {
			t.Errorf("%s hangs from %v, want %v", key, got, want)
		}
	}
}

// A file is written without pause while its directory is removed and
// made again under it: once the churn stops, the file as it was left was
// hinted and checked, the next write is too, and every directory counted
// as watched holds a watch.
func TestPathWatcherFollowsChurnUnderWrites(t *testing.T) {
	b := setupWatch(t)
	root := t.TempDir()
	srv := filepath.Join(root, "srv")
	dir := filepath.Join(srv, "app")
	f := filepath.Join(dir, "app.conf")
	b.set("f", resources.WatchTarget{Path: f})
	must(t, os.MkdirAll(dir, 0o755))
	stop := make(chan struct{})
	last := make(chan int)
	go func() { // the writer: sequence numbers, as fast as it can
		ok := 0
		for i := 1; ; i++ {
			select {
			case <-stop:
				last <- ok
				return
			default:
			}
			if os.WriteFile(f, []byte(strconv.Itoa(i)), 0o644) == nil {
				ok = i
			}
		}
	}()
	// Hints are checked meanwhile, as a loop would: each reads the file.
	var mu sync.Mutex
	seen := 0
	changed := make(chan struct{}, 1)
	checking := make(chan struct{})
	checkerDone := make(chan struct{})
	go func() {
		defer close(checkerDone)
		for {
			select {
			case h := <-b.hints:
				if h.Key != "f" {
					t.Errorf("hint %+v, want f's", h)
				}
				data, err := os.ReadFile(f)
				if err != nil {
					continue
				}
				if n, err := strconv.Atoi(string(data)); err == nil {
					mu.Lock()
					seen = max(seen, n)
					mu.Unlock()
					select {
					case changed <- struct{}{}:
					default:
					}
				}
			case <-checking:
				return
			}
		}
	}()
	// seenAtLeast waits until a check after a hint has seen n.
	seenAtLeast := func(n int) {
		t.Helper()
		deadline := time.After(settleWithin)
		for {
			mu.Lock()
			got := seen
			mu.Unlock()
			if got >= n {
				return
			}
			select {
			case <-changed:
			case <-deadline:
				b.pw.mu.Lock()
				t.Logf("watched: %v; unsettled: %v", b.pw.names, b.pw.unsettled)
				b.pw.mu.Unlock()
				t.Logf("fsnotify holds: %v", b.pw.w.WatchList())
				t.Fatalf("write %d not hinted within %s (checks saw %d)", n, settleWithin, got)
			}
		}
	}
	for i := 0; i < 200; i++ {
		gone := dir
		if i%2 == 0 {
			gone = srv
		}
		// The writer may put the file back in between: try again.
		for tries := 0; ; tries++ {
			err := os.RemoveAll(gone)
			if err == nil {
				break
			}
			if tries == 100 {
				t.Fatal(err)
			}
		}
		must(t, os.MkdirAll(dir, 0o755))
	}
	close(stop)
	n := <-last
	// The file as the churn left it (the last write may have been
	// removed by a later RemoveAll) was hinted and checked.
	if data, err := os.ReadFile(f); err == nil {
		at, err := strconv.Atoi(string(data))
		must(t, err)
		seenAtLeast(at)
	}
	// One more, now that the churn is over.
	must(t, os.WriteFile(f, []byte(strconv.Itoa(n+1)), 0o644))
	seenAtLeast(n + 1)
	close(checking)
	<-checkerDone
	b.chmodHinted("f", f)
	if got := b.checkWatches("f"); !slices.Equal(got, []entry{{dir, "app.conf"}}) {
		t.Errorf("f hangs from %v, want %v", got, []entry{{dir, "app.conf"}})
	}
}

// A directory the watcher cannot watch (here: an injected ENOSPC, the
// kernel's limit, then ENOENT as if it went between stat and watch) does
// not leave its key silently unwatched: it is hinted "not watched",
// retried, and hinted "watched again" once the watch holds; writes after
// that are hinted by name.
func TestPathWatcherRetriesWhatItCannotWatch(t *testing.T) {
	b := setupWatch(t)
	root := t.TempDir()
	dir := filepath.Join(root, "app")
	f := filepath.Join(dir, "app.conf")
	b.set("f", resources.WatchTarget{Path: f})
	var fault error               // under b.pw.mu, as addWatch is called
	failed := make(chan int, 100) // each injected failure, numbered
	fails := 0
	setFault := func(err error) {
		b.pw.mu.Lock()
		defer b.pw.mu.Unlock()
		fault = err
	}
	b.pw.mu.Lock()
	add := b.pw.addWatch
	b.pw.addWatch = func(d string) error {
		if fault != nil && d == dir {
			fails++
			select {
			case failed <- fails:
			default:
			}
			return fault
		}
		return add(d)
	}
	b.pw.mu.Unlock()
	// failures waits until the injected failures number at least n.
	failures := func(n int) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case got := <-failed:
				if got >= n {
					return
				}
			case <-deadline:
				t.Fatalf("fewer than %d failed watches within 5s", n)
			}
		}
	}

	setFault(syscall.ENOSPC)
	must(t, os.Mkdir(dir, 0o755))
	h := b.expect("f", "not watched: ")
	if !strings.Contains(h.Why, ErrWatchLimit.Error()) {
		t.Fatalf("hint %q does not say the limit", h.Why)
	}
	failures(3) // retries go on while the limit holds
	setFault(nil)
	b.expect("f", "watched again "+f)
	must(t, os.WriteFile(f, []byte("x"), 0o644))
	b.expect("f", "create "+f)
	b.checkWatches("f")

	// The directory goes between stat and watch, every time: Set leaves
	// it to retries (no error), which hint it once it holds.
	setFault(syscall.ENOENT)
	b.set("f", resources.WatchTarget{Path: f})
	b.pw.mu.Lock()
	unsettled, failedSoFar := len(b.pw.unsettled), fails
	b.pw.mu.Unlock()
	if unsettled != 1 {
		t.Fatalf("%d keys unsettled after a Set whose directory was gone %d times, want 1", unsettled, maxFollow)
	}
	failures(failedSoFar + 1) // a retry failed too
	setFault(nil)
	b.expect("f", "watched again "+f)
	must(t, os.WriteFile(f, []byte("y"), 0o644))
	b.expect("f", "write "+f)
	b.checkWatches("f")
}

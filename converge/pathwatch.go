package converge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/manifold-run/manifold/resources"
)

// Hint says that a resource may have drifted. It is a hint, never a
// verdict: the resource's check decides.
type Hint struct {
	// Key names the resource (the caller's key, given to Set); empty when
	// All is set.
	Key string
	// All asks for a check of every resource: the kernel dropped events
	// (its queue overflowed), so any of them may have drifted unseen.
	All bool
	// Why is what happened, for logs and run triggers ("write
	// /etc/app.conf", "remove /etc/app.conf", "event queue overflow").
	Why string
}

// PathWatcher watches the paths of many resources through one inotify
// instance. It watches directories (inotify's unit), never single files:
// a file's directory is watched and its events are filtered by name, so a
// file that does not exist yet, is replaced by rename or is removed stays
// watched. Where a path's directory does not exist, its nearest existing
// ancestor is watched until the missing directories appear.
//
// A directory that goes away between its stat and its watch is looked
// for again (its nearest existing ancestor); a key whose directories
// change faster than it can follow them (maxFollow steps in a row) or
// whose watch is lost to the kernel's limit is unsettled: it is hinted
// at once ("not watched: ..."), its registration is retried with back-off
// (retryFirst to retryMax) and hinted again when it holds ("watched again
// ..."), so a write made while it was not watched is checked.
//
// Set and Remove may be called from any goroutine; hints go to the channel
// given to NewPathWatcher, which the caller must keep reading.
type PathWatcher struct {
	w     *fsnotify.Watcher
	hints chan<- Hint
	done  chan struct{}
	wg    sync.WaitGroup

	mu      sync.Mutex
	targets map[string][]resources.WatchTarget    // key -> its targets
	entries map[string][]entry                    // key -> the (dir, name) it hangs from
	names   map[string]map[string]map[string]bool // watched dir -> entry name -> keys
	trees   map[string]map[string]bool            // tree root -> keys
	inTree  map[string]string                     // watched dir below a tree root -> root
	closed  bool

	// unsettled keys could not be watched as their targets ask; the
	// loop retries them when retry fires (armed only while there are
	// any: an idle watcher has no timer).
	unsettled map[string]error
	retry     *time.Timer
	armed     bool
	backoff   time.Duration

	// addWatch adds one inotify watch (the fsnotify watcher's Add; tests
	// put faults in).
	addWatch func(string) error

	// kids indexes the watched directories (names or inTree) by their
	// parent, and ino holds the directory each was when watched: a new
	// watch of a directory re-checks its watched children (recheck), as
	// fsnotify drops the delete event of a watched directory whose parent
	// it watches by then (see settle).
	kids    map[string]map[string]bool
	ino     map[string]devIno
	recheck []string
}

// devIno names a directory on its file system.
type devIno struct{ dev, ino uint64 }

// Bounds of the retries of unsettled keys.
const (
	retryFirst = 10 * time.Millisecond
	retryMax   = 5 * time.Second
)

// errGone: a directory went away between its stat and its watch.
var errGone = errors.New("converge: directory gone")

// errUnsettled: the directories of a path changed faster than the
// watcher followed them.
var errUnsettled = errors.New("converge: directories changed faster than they could be followed")

// NewPathWatcher starts a watcher that sends its hints to hints.
func NewPathWatcher(hints chan<- Hint) (*PathWatcher, error) {
	w, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return nil, fmt.Errorf("converge: inotify: %w", err)
	}
	p := &PathWatcher{w: w, hints: hints, done: make(chan struct{}),
		targets: map[string][]resources.WatchTarget{}, entries: map[string][]entry{}, names: map[string]map[string]map[string]bool{},
		trees: map[string]map[string]bool{}, inTree: map[string]string{},
		unsettled: map[string]error{}, retry: time.NewTimer(time.Hour), backoff: retryFirst,
		kids: map[string]map[string]bool{}, ino: map[string]devIno{}}
	p.retry.Stop()
	p.addWatch = w.Add
	p.wg.Add(2)
	go p.loop()
	go p.errorsLoop()
	return p, nil
}

// Set watches key's targets, in place of those it had. An error (the
// inotify limit: ErrWatchLimit) leaves the key watched as far as the
// kernel allowed: the caller must cover it by interval checks. A key
// whose directories change while it is being set is retried (above) and
// is no error.
func (p *PathWatcher) Set(key string, targets []resources.WatchTarget) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("converge: path watcher closed")
	}
	p.unregister(key)
	delete(p.unsettled, key)
	p.targets[key] = targets
	err := p.register(key, targets)
	// Hints of what settle finds go through the retries: Set's caller
	// may be the one reading the hints.
	for _, h := range p.settle(nil, false) {
		p.unsettle(h.Key, errors.New(h.Why))
	}
	if errors.Is(err, errUnsettled) {
		p.unsettle(key, err)
		return nil
	}
	return err
}

// Remove stops watching key's targets.
func (p *PathWatcher) Remove(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unregister(key)
	delete(p.targets, key)
	delete(p.unsettled, key)
}

// Close stops the watcher and waits for its goroutine. Safe to call twice.
func (p *PathWatcher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.retry.Stop()
	p.mu.Unlock()
	close(p.done)
	err := p.w.Close()
	p.wg.Wait()
	return err
}

// Watched is the number of directories watched (each one inotify watch).
func (p *PathWatcher) Watched() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.names) + len(p.inTree)
}

// register watches targets for key. The caller holds mu.
func (p *PathWatcher) register(key string, targets []resources.WatchTarget) error {
	var first error
	for _, t := range targets {
		if t.Path == "" {
			continue // a unit or a KV entry: not the file system's
		}
		path := filepath.Clean(t.Path)
		if err := p.watchEntry(key, path); err != nil && first == nil {
			first = err
		}
		if t.Tree {
			if p.trees[path] == nil {
				p.trees[path] = map[string]bool{}
			}
			p.trees[path][key] = true
			if err := p.watchTree(path, path); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// watchEntry watches the directory holding path (or its nearest existing
// ancestor, filtering on the next missing component). The caller holds mu.
func (p *PathWatcher) watchEntry(key, path string) error {
	for tries := 0; tries < maxFollow; tries++ {
		dir, name := nearestDir(path)
		if p.names[dir] == nil {
			err := p.add(dir)
			if errors.Is(err, errGone) {
				// Removed between the stat and the watch: no event
				// of it would ever come. Look again, higher.
				continue
			}
			if err != nil {
				return err
			}
			p.names[dir] = map[string]map[string]bool{}
			p.index(dir)
		}
		// A missing directory on the way made between the stat and the
		// watch: its create event was never seen, so nothing would
		// follow it. Look again and go deeper.
		if next := filepath.Join(dir, name); next != path {
			if fi, err := os.Stat(next); err == nil && fi.IsDir() {
				if _, tree := p.inTree[dir]; len(p.names[dir]) == 0 && !tree {
					delete(p.names, dir)
					p.index(dir)
					_ = p.w.Remove(dir)
				}
				continue
			}
		}
		p.record(key, dir, name)
		return nil
	}
	return fmt.Errorf("%w: %s", errUnsettled, path)
}

// maxFollow bounds the steps (a directory gone, a directory made) one
// watchEntry takes before the key is left to retries.
const maxFollow = 8

// nearestDir returns path's nearest existing directory among its
// ancestors and the name under it that leads to path.
func nearestDir(path string) (dir, name string) {
	dir, name = filepath.Dir(path), filepath.Base(path)
	for dir != "/" && dir != "." {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			break
		}
		dir, name = filepath.Dir(dir), filepath.Base(dir)
	}
	return dir, name
}

// record notes that key waits on name in the watched dir. The caller
// holds mu.
func (p *PathWatcher) record(key, dir, name string) {
	if p.names[dir][name] == nil {
		p.names[dir][name] = map[string]bool{}
	}
	p.names[dir][name][key] = true
	p.entries[key] = append(p.entries[key], entry{dir, name})
}

// entry is a name in a watched directory.
type entry struct{ dir, name string }

// watchTree watches dir and every directory below it, as part of root's
// tree. The caller holds mu.
func (p *PathWatcher) watchTree(root, dir string) error {
	var first error
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if _, ok := p.inTree[path]; ok {
			return nil
		}
		if err := p.add(path); err != nil {
			if errors.Is(err, errGone) {
				return filepath.SkipDir // its parent's events tell if it comes back
			}
			if first == nil {
				first = err
			}
			return filepath.SkipAll
		}
		p.inTree[path] = root
		p.index(path)
		return nil
	})
	return first
}

// add adds one inotify watch, translating the kernel's limit. A directory
// watched for two reasons (an entry's directory and part of a tree) holds
// one watch: fsnotify ignores a second Add.
func (p *PathWatcher) add(dir string) error {
	err := p.addWatch(dir)
	switch {
	case err == nil:
		if fi, err := os.Stat(dir); err == nil {
			p.ino[dir] = devInoOf(fi)
		}
		for c := range p.kids[dir] {
			p.recheck = append(p.recheck, c)
		}
		return nil
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w: %s", ErrWatchLimit, dir)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return errGone
	default:
		return fmt.Errorf("converge: watch %s: %w", dir, err)
	}
}

// unregister forgets key's entries, dropping the watches nobody needs any
// more. The caller holds mu.
func (p *PathWatcher) unregister(key string) {
	for _, e := range p.entries[key] {
		dir, names := e.dir, p.names[e.dir]
		if names == nil {
			continue
		}
		if keys := names[e.name]; keys != nil {
			delete(keys, key)
			if len(keys) == 0 {
				delete(names, e.name)
			}
		}
		if len(names) == 0 {
			delete(p.names, dir)
			p.index(dir)
			if _, tree := p.inTree[dir]; !tree {
				_ = p.w.Remove(dir)
			}
		}
	}
	delete(p.entries, key)
	for _, t := range p.targets[key] {
		if t.Path == "" {
			continue
		}
		root := filepath.Clean(t.Path)
		keys := p.trees[root]
		if !t.Tree || !keys[key] {
			continue
		}
		delete(keys, key)
		if len(keys) > 0 {
			continue
		}
		delete(p.trees, root)
		for dir, r := range p.inTree {
			if r == root {
				delete(p.inTree, dir)
				p.index(dir)
				if p.names[dir] == nil {
					_ = p.w.Remove(dir)
				}
			}
		}
	}
}

func (p *PathWatcher) loop() {
	defer p.wg.Done()
	for {
		select {
		case <-p.done:
			return
		case ev, ok := <-p.w.Events:
			if !ok {
				return
			}
			for _, h := range p.hintsFor(ev) {
				if !p.send(h) {
					return
				}
			}
		case <-p.retry.C:
			for _, h := range p.retryUnsettled() {
				if !p.send(h) {
					return
				}
			}
		}
	}
}

// errorsLoop reads fsnotify's errors on a goroutine of its own: fsnotify
// sends some of them while holding the lock its Add and Remove take (an
// IN_MOVE_SELF's removal), so the goroutine calling those (loop) must not
// be the one to read them.
func (p *PathWatcher) errorsLoop() {
	defer p.wg.Done()
	for {
		select {
		case <-p.done:
			return
		case err, ok := <-p.w.Errors:
			if !ok {
				return
			}
			if errors.Is(err, syscall.EINVAL) {
				// fsnotify removing (on IN_MOVE_SELF) a watch the
				// kernel had dropped already (the moved directory was
				// deleted too): its events came, nothing was lost.
				continue
			}
			why := "watch error: " + err.Error()
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				why = "event queue overflow"
			}
			if !p.send(Hint{All: true, Why: why}) {
				return
			}
		}
	}
}

func (p *PathWatcher) send(h Hint) bool {
	select {
	case p.hints <- h:
		return true
	case <-p.done:
		return false
	}
}

// hintsFor maps one event to the keys it concerns, and follows the tree:
// a directory created where a missing one was awaited, or inside a watched
// tree, is watched from now on.
func (p *PathWatcher) hintsFor(ev fsnotify.Event) []Hint {
	p.mu.Lock()
	defer p.mu.Unlock()
	path := filepath.Clean(ev.Name)
	why := strings.ToLower(opName(ev.Op)) + " " + path
	seen := map[string]bool{}
	var out []Hint
	hint := func(keys map[string]bool) {
		for k := range keys {
			if !seen[k] {
				seen[k] = true
				out = append(out, Hint{Key: k, Why: why})
			}
		}
	}
	dir, name := filepath.Dir(path), filepath.Base(path)
	if names := p.names[dir]; names != nil {
		if keys := names[name]; keys != nil {
			hint(keys)
			// A missing directory of a watched path appeared (or went):
			// register its keys again, one level deeper or back up.
			if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				for _, k := range sortedKeys(keys) {
					out = p.reregister(k, out)
				}
			}
		}
	}
	// Inside a tree: the nearest tree root above the path.
	for d := path; ; d = filepath.Dir(d) {
		if keys := p.trees[d]; keys != nil {
			hint(keys)
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
					_ = p.watchTree(d, path)
				}
			}
			break
		}
		if d == "/" || d == "." {
			break
		}
	}
	// A watched directory itself went away: the keys that hung from it
	// look for the nearest existing ancestor again.
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		if names, ok := p.names[path]; ok {
			delete(p.names, path)
			p.index(path)
			_ = p.w.Remove(path)
			var again []string
			for _, keys := range names {
				hint(keys)
				again = append(again, sortedKeys(keys)...)
			}
			for _, k := range again {
				out = p.reregister(k, out)
			}
		}
		if _, ok := p.inTree[path]; ok {
			delete(p.inTree, path)
			p.index(path)
		}
	}
	return p.settle(out, true)
}

// index files dir under its parent in kids while it is watched (an
// entry's directory or part of a tree), and forgets it when not. The
// caller holds mu.
func (p *PathWatcher) index(dir string) {
	parent := filepath.Dir(dir)
	_, tree := p.inTree[dir]
	if p.names[dir] != nil || tree {
		if p.kids[parent] == nil {
			p.kids[parent] = map[string]bool{}
		}
		p.kids[parent][dir] = true
		return
	}
	delete(p.ino, dir)
	if kids := p.kids[parent]; kids != nil {
		delete(kids, dir)
		if len(kids) == 0 {
			delete(p.kids, parent)
		}
	}
}

// maxSettle bounds the rounds of one settle (each round's re-registrations
// may add watches whose children are checked in the next).
const maxSettle = 64

// settle re-checks the watched children of the directories newly watched
// since the last settle. fsnotify drops the DELETE_SELF of a watched
// directory when, at the time it reads the event, it watches the
// directory's parent: the parent's own delete event stands for it. A
// parent watched only after the child was removed never had that event,
// so the child would stay counted as watched with a dead watch, and the
// writes below it, once it is made again, would go unhinted. So: a child
// that is gone is forgotten and its keys registered again (they hang
// higher); one that is there is watched again (an inotify watch of the
// same directory is the same watch; of a directory made again, a new
// one). The keys of both are hinted: always from events (the directories
// are changing), from Set only when the child is not the directory it was
// when watched. The caller holds mu.
func (p *PathWatcher) settle(out []Hint, fromEvents bool) []Hint {
	for round := 0; len(p.recheck) > 0 && round < maxSettle; round++ {
		list := p.recheck
		p.recheck = nil
		slices.Sort(list)
		for i, c := range list {
			if i > 0 && list[i-1] == c {
				continue
			}
			out = p.settleDir(out, c, fromEvents)
		}
	}
	if len(p.recheck) > 0 {
		// Directories still churning: their keys go to the retries.
		for _, c := range p.recheck {
			for _, k := range p.keysAt(c) {
				p.unsettle(k, fmt.Errorf("%w: %s", errUnsettled, c))
			}
		}
		p.recheck = nil
	}
	return out
}

// settleDir re-checks one watched directory c (see settle). The caller
// holds mu.
func (p *PathWatcher) settleDir(out []Hint, c string, fromEvents bool) []Hint {
	names, inNames := p.names[c]
	root, inTree := p.inTree[c]
	if !inNames && !inTree {
		return out
	}
	keys := p.keysAt(c)
	err := p.add(c)
	switch {
	case err == nil:
		was, ok := p.ino[c]
		fi, serr := os.Stat(c)
		replaced := serr != nil || !ok || devInoOf(fi) != was
		if !replaced && !fromEvents {
			return out
		}
		if inTree && replaced {
			// Its subdirectories are the old directory's: watch the
			// new one's.
			p.dropTree(c)
			_ = p.watchTree(root, c)
		}
		for _, k := range keys {
			out = append(out, Hint{Key: k, Why: "watched again " + c})
		}
		return out
	case errors.Is(err, errGone):
		if inNames {
			delete(p.names, c)
			p.index(c)
		}
		if inTree {
			p.dropTree(c)
		}
		_ = p.w.Remove(c)
		for _, k := range keys {
			out = append(out, Hint{Key: k, Why: "remove " + c})
		}
		for _, keys := range names {
			for _, k := range sortedKeys(keys) {
				out = p.reregister(k, out)
			}
		}
		return out
	default:
		for _, k := range keys {
			p.unsettle(k, err)
			out = append(out, Hint{Key: k, Why: "not watched: " + err.Error()})
		}
		return out
	}
}

// keysAt lists the keys that hang from the watched directory c: its
// entries' and its tree's. The caller holds mu.
func (p *PathWatcher) keysAt(c string) []string {
	set := map[string]bool{}
	for _, keys := range p.names[c] {
		for k := range keys {
			set[k] = true
		}
	}
	if root, ok := p.inTree[c]; ok {
		for k := range p.trees[root] {
			set[k] = true
		}
	}
	return sortedKeys(set)
}

// dropTree forgets dir and the tree directories below it (their watches
// are the old directory's). The caller holds mu.
func (p *PathWatcher) dropTree(dir string) {
	for d := range p.inTree {
		if d == dir || strings.HasPrefix(d, dir+string(filepath.Separator)) {
			delete(p.inTree, d)
			p.index(d)
			if p.names[d] == nil {
				_ = p.w.Remove(d)
			}
		}
	}
}

func devInoOf(fi fs.FileInfo) devIno {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return devIno{uint64(st.Dev), st.Ino}
	}
	return devIno{}
}

// reregister registers key's targets again. A key it cannot watch (the
// inotify limit, directories changing faster than it follows them) is
// hinted "not watched" (appended to out) and left to retries. The caller
// holds mu.
func (p *PathWatcher) reregister(key string, out []Hint) []Hint {
	t := p.targets[key]
	p.unregister(key)
	if err := p.register(key, t); err != nil {
		p.unsettle(key, err)
		out = append(out, Hint{Key: key, Why: "not watched: " + err.Error()})
	} else {
		delete(p.unsettled, key)
	}
	return out
}

// unsettle leaves key to the retries. The caller holds mu.
func (p *PathWatcher) unsettle(key string, err error) {
	p.unsettled[key] = err
	if !p.armed {
		p.armed = true
		p.retry.Reset(p.backoff)
	}
}

// retryUnsettled registers the unsettled keys again: those that hold are
// hinted (a write while they were not watched was not seen), the others
// wait for the next retry, twice as long (at most retryMax).
func (p *PathWatcher) retryUnsettled() []Hint {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = false
	if p.closed {
		return nil
	}
	var out []Hint
	for _, key := range sortedKeys(p.unsettled) {
		t := p.targets[key]
		p.unregister(key)
		err := p.register(key, t)
		if err != nil {
			p.unsettled[key] = err
			continue
		}
		delete(p.unsettled, key)
		out = append(out, Hint{Key: key, Why: "watched again " + firstPath(t)})
	}
	out = p.settle(out, true)
	if len(p.unsettled) == 0 {
		p.backoff = retryFirst
		return out
	}
	p.backoff = min(2*p.backoff, retryMax)
	p.armed = true
	p.retry.Reset(p.backoff)
	return out
}

// firstPath is the first file system path among targets.
func firstPath(targets []resources.WatchTarget) string {
	for _, t := range targets {
		if t.Path != "" {
			return filepath.Clean(t.Path)
		}
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func opName(op fsnotify.Op) string {
	switch {
	case op.Has(fsnotify.Create):
		return "create"
	case op.Has(fsnotify.Remove):
		return "remove"
	case op.Has(fsnotify.Rename):
		return "rename"
	case op.Has(fsnotify.Write):
		return "write"
	case op.Has(fsnotify.Chmod):
		return "chmod"
	default:
		return op.String()
	}
}

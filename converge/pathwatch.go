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
}

// NewPathWatcher starts a watcher that sends its hints to hints.
func NewPathWatcher(hints chan<- Hint) (*PathWatcher, error) {
	w, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return nil, fmt.Errorf("converge: inotify: %w", err)
	}
	p := &PathWatcher{w: w, hints: hints, done: make(chan struct{}),
		targets: map[string][]resources.WatchTarget{}, entries: map[string][]entry{}, names: map[string]map[string]map[string]bool{},
		trees: map[string]map[string]bool{}, inTree: map[string]string{}}
	p.wg.Add(1)
	go p.loop()
	return p, nil
}

// Set watches key's targets, in place of those it had. An error (the
// inotify limit: ErrWatchLimit) leaves the key watched as far as the
// kernel allowed: the caller must cover it by interval checks.
func (p *PathWatcher) Set(key string, targets []resources.WatchTarget) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("converge: path watcher closed")
	}
	p.unregister(key)
	p.targets[key] = targets
	return p.register(key, targets)
}

// Remove stops watching key's targets.
func (p *PathWatcher) Remove(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unregister(key)
	delete(p.targets, key)
}

// Close stops the watcher and waits for its goroutine. Safe to call twice.
func (p *PathWatcher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
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
	for tries := 0; ; tries++ {
		dir, name := nearestDir(path)
		if p.names[dir] == nil {
			if err := p.add(dir); err != nil {
				return err
			}
			p.names[dir] = map[string]map[string]bool{}
		}
		// A missing directory on the way made between the stat and the
		// watch: its create event was never seen, so nothing would
		// follow it. Look again and go deeper (at most maxFollow times:
		// a tree made and removed faster than that is left to the
		// interval check).
		if next := filepath.Join(dir, name); next != path && tries < maxFollow {
			if fi, err := os.Stat(next); err == nil && fi.IsDir() {
				if _, tree := p.inTree[dir]; len(p.names[dir]) == 0 && !tree {
					delete(p.names, dir)
					_ = p.w.Remove(dir)
				}
				continue
			}
		}
		p.record(key, dir, name)
		return nil
	}
}

// maxFollow bounds how many directories made during one watchEntry it
// follows.
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
			if first == nil {
				first = err
			}
			return filepath.SkipAll
		}
		p.inTree[path] = root
		return nil
	})
	return first
}

// add adds one inotify watch, translating the kernel's limit. A directory
// watched for two reasons (an entry's directory and part of a tree) holds
// one watch: fsnotify ignores a second Add.
func (p *PathWatcher) add(dir string) error {
	err := p.w.Add(dir)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w: %s", ErrWatchLimit, dir)
	case errors.Is(err, fs.ErrNotExist):
		return nil // gone in between; its parent's events say when it is back
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
		case err, ok := <-p.w.Errors:
			if !ok {
				return
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
					p.reregister(k)
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
			_ = p.w.Remove(path)
			var again []string
			for _, keys := range names {
				hint(keys)
				again = append(again, sortedKeys(keys)...)
			}
			for _, k := range again {
				p.reregister(k)
			}
		}
		if _, ok := p.inTree[path]; ok {
			delete(p.inTree, path)
		}
	}
	return out
}

// reregister registers key's targets again (errors are the inotify limit
// or a race with the file system, both covered by interval checks). The
// caller holds mu.
func (p *PathWatcher) reregister(key string) {
	t := p.targets[key]
	p.unregister(key)
	_ = p.register(key, t)
}

func sortedKeys(m map[string]bool) []string {
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

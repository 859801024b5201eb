package safefs

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MaxCachedDirs bounds the directories one Dirs keeps open: past it,
// OpenParentContext walks and hands out a Dir of the caller's own, as
// OpenParent does.
const MaxCachedDirs = 64

// Dirs keeps the parent directories opened by OpenParentContext for reuse
// by the resources of one short unit of work (a worker's segment of
// resources): files of one directory cost one walk from "/" together, not
// one each (a walk is a dozen system calls and an os.Root).
//
// A kept directory is handed out again only while its path still leads to
// it: a stat of the path must give the device and inode the walk opened,
// else the path is walked again (a directory removed, renamed or replaced
// by a link since, by this process or another). A reused descriptor was
// reached by a walk that followed only trusted links, so it gives no more
// than a fresh walk would: anything planted since makes the stat differ
// and the new walk refuses it. The stat is made at most once per
// DirsRecheck for each kept directory: the files of one directory handled
// one after another share it (a stat of the whole path was 6 % of a
// 10,000-file repair's CPU, one per file and stage). A directory swapped
// within that window is written into as it was when last checked: the
// very directory the path led to then, reached as safely; the engine's
// re-check after the write then reads the path as it is.
//
// Dirs is safe for concurrent use. Close it when the unit of work ends;
// the zero Dirs is not usable: use NewDirs.
type Dirs struct {
	mu   sync.Mutex
	dirs map[string]*cachedDir
	// now is the clock of the rechecks (tests): monotonic time since
	// dirsEpoch.
	now func() time.Duration
	// stale are dropped directories, closed with the cache: a caller may
	// still hold them.
	stale  []*Dir
	closed bool
}

type cachedDir struct {
	d        *Dir
	dev, ino uint64
	checked  atomic.Int64 // when its path last led to it (Dirs.now)
}

// DirsRecheck is how long a kept directory is handed out without a new
// stat of its path (see Dirs).
const DirsRecheck = 2 * time.Millisecond

// dirsEpoch is the origin of Dirs' clock.
var dirsEpoch = time.Now()

func sinceDirsEpoch() time.Duration { return time.Since(dirsEpoch) }

// NewDirs returns an empty cache.
func NewDirs() *Dirs { return &Dirs{dirs: map[string]*cachedDir{}, now: sinceDirsEpoch} }

type dirsKey struct{}

// WithDirs returns ctx carrying c: OpenParentContext under it reuses c's
// directories.
func WithDirs(ctx context.Context, c *Dirs) context.Context {
	return context.WithValue(ctx, dirsKey{}, c)
}

// DirsFrom returns the cache ctx carries, or nil.
func DirsFrom(ctx context.Context) *Dirs {
	c, _ := ctx.Value(dirsKey{}).(*Dirs)
	return c
}

// OpenParentContext is OpenParent through the cache ctx carries (see
// Dirs), or OpenParent itself when it carries none. The caller closes
// the Dir as always: closing a cached one leaves it open for the next
// caller (the cache closes it).
func OpenParentContext(ctx context.Context, path string) (*Dir, string, error) {
	c := DirsFrom(ctx)
	if c == nil {
		return OpenParent(path)
	}
	if !filepath.IsAbs(path) {
		return nil, "", fmt.Errorf("%s: not an absolute path", path)
	}
	path = filepath.Clean(path)
	if path == "/" {
		return OpenParent(path)
	}
	d, err := c.open(filepath.Dir(path))
	if err != nil {
		return nil, "", err
	}
	return d, filepath.Base(path), nil
}

// OpenDirContext is OpenDir through the cache ctx carries, as
// OpenParentContext.
func OpenDirContext(ctx context.Context, path string) (*Dir, error) {
	c := DirsFrom(ctx)
	if c == nil || !filepath.IsAbs(path) {
		return OpenDir(path)
	}
	return c.open(filepath.Clean(path))
}

func (c *Dirs) open(dir string) (*Dir, error) {
	c.mu.Lock()
	e, ok := c.dirs[dir]
	c.mu.Unlock()
	if ok {
		now := c.now()
		if now-time.Duration(e.checked.Load()) < DirsRecheck {
			return e.d, nil
		}
		var st syscall.Stat_t
		if syscall.Stat(dir, &st) == nil && st.Dev == e.dev && st.Ino == e.ino {
			e.checked.Store(int64(now))
			return e.d, nil
		}
		c.drop(dir, e)
	}
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(d.fd, &st); err != nil {
		return d, nil // not kept: the caller's own
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.dirs) >= MaxCachedDirs {
		return d, nil
	}
	if old, ok := c.dirs[dir]; ok {
		// Another goroutine kept one meanwhile: use it.
		d.Close()
		return old.d, nil
	}
	d.shared = true
	e = &cachedDir{d: d, dev: st.Dev, ino: st.Ino}
	e.checked.Store(int64(c.now()))
	c.dirs[dir] = e
	return d, nil
}

// drop forgets e when it is still dir's entry. Its descriptor stays open
// until Close: a caller may still hold it.
func (c *Dirs) drop(dir string, e *cachedDir) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirs[dir] == e {
		delete(c.dirs, dir)
		c.stale = append(c.stale, e.d)
	}
}

// Len is how many directories c keeps.
func (c *Dirs) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.dirs)
}

// Close closes every directory c kept; later opens through c are not
// kept. It is idempotent.
func (c *Dirs) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var first error
	for _, e := range c.dirs {
		if err := e.d.closeShared(); err != nil && first == nil {
			first = err
		}
	}
	for _, d := range c.stale {
		if err := d.closeShared(); err != nil && first == nil {
			first = err
		}
	}
	c.dirs, c.stale = map[string]*cachedDir{}, nil
	return first
}

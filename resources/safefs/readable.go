package safefs

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// ReadableByOthers reports whether an unprivileged user of this host (not
// the file's owner, not in its group) could read the file at path: it is
// world-readable (o+r) and every directory from "/" down to it is
// world-searchable (o+x), symbolic links resolved. A path that cannot be
// examined counts as not readable: diffs of it are hidden.
func ReadableByOthers(path string) bool {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	fi, err := os.Stat(real)
	if err != nil || fi.Mode().Perm()&0o004 == 0 {
		return false
	}
	return searchable(filepath.Dir(real))
}

// ReachableByOthers reports whether an unprivileged user could reach the
// entries of directory dir: every directory from "/" down to dir, dir
// included, is world-searchable (o+x), symbolic links resolved. A file
// about to be created in dir with mode m is readable by others when
// ReachableByOthers(dir) and m&0o004 != 0.
func ReachableByOthers(dir string) bool {
	reachWalks.Add(1)
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	return searchable(real)
}

// searchable checks dir and its ancestors, dir being free of links.
func searchable(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() || fi.Mode()&fs.ModePerm&0o001 == 0 {
			return false
		}
		if d == "/" || d == "." {
			return true
		}
	}
}

// MaxReachEntries bounds the directories one Reach remembers: past it,
// verdicts are computed each time, as without a cache.
const MaxReachEntries = 4096

// Reach remembers the verdicts of ReachableByOthers by directory for one
// short unit of work during which no directory's mode or ownership is
// changed by the work itself: a worker's batch of files (a directory
// resource is never a member of a batch, it ends one). Files of one
// directory then cost one walk from "/" together, not two each (their
// check's diff and their apply's). A change made by another process
// during the unit is seen by the next one.
//
// Reach is safe for concurrent use; the zero Reach is not usable: use
// NewReach.
type Reach struct {
	mu sync.Mutex
	m  map[string]bool
}

// NewReach returns an empty cache.
func NewReach() *Reach { return &Reach{m: map[string]bool{}} }

type reachKey struct{}

// WithReach returns ctx carrying r: ReachableByOthersContext under it
// uses r's verdicts.
func WithReach(ctx context.Context, r *Reach) context.Context {
	return context.WithValue(ctx, reachKey{}, r)
}

// reachWalks counts the walks of ReachableByOthers (tests).
var reachWalks atomic.Int64

// ReachableByOthersContext is ReachableByOthers(dir), remembered by the
// Reach ctx carries (see WithReach).
func ReachableByOthersContext(ctx context.Context, dir string) bool {
	r, _ := ctx.Value(reachKey{}).(*Reach)
	if r == nil {
		return ReachableByOthers(dir)
	}
	dir = filepath.Clean(dir)
	r.mu.Lock()
	v, ok := r.m[dir]
	r.mu.Unlock()
	if ok {
		return v
	}
	v = ReachableByOthers(dir)
	r.mu.Lock()
	if len(r.m) < MaxReachEntries {
		r.m[dir] = v
	}
	r.mu.Unlock()
	return v
}

package safefs

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MaxPendingReleases bounds the replaced files held for release (see
// release), and so the descriptors they take: at most this many, and at
// most a quarter of the process's descriptor limit (RLIMIT_NOFILE). Past
// it a write releases the file it replaced itself, as before.
const MaxPendingReleases = 8192

// ReleaseQuiet is how long writes must pause before the releaser frees
// the files they replaced (or until it holds half its bound, or
// MaxHeldBytes): on ext4
// without a journal, creating an inode skips, one by one, every inode of
// its group freed in the last 30 s (find_inode_bit, recently_deleted), so
// freeing the replaced files while a storm's writes go on made each
// temporary file's creation cost more than the one before.
const ReleaseQuiet = 100 * time.Millisecond

// MaxHeldBytes bounds the space of the replaced files held back (see
// ReleaseQuiet), by their allocated blocks: past it the releaser frees
// what it holds at once, so a run replacing large files gives their space
// back as it goes.
const MaxHeldBytes = 64 << 20

// A write replaces its target by renaming a new inode over it; the old
// inode is freed when the rename drops its last name. On a filesystem
// mounted with online discard (ext4 -o discard) freeing its blocks waits
// for a synchronous TRIM of them: 0.4–0.5 ms of wall time per replaced
// file on the development machine, 90 % of it waiting for the device, on
// the writer's thread, one file after another (5 s of a 10,000-file
// repair storm). So a write holds the file it is about to replace by an
// O_PATH descriptor (hold) across the rename, and hands it to the
// releaser (release), a goroutine that closes the descriptors: the last
// reference goes there, and the freeing and its TRIM with it. The target
// has its new content, durable, when the write returns; only the old
// content's blocks are given back later (within milliseconds unless the
// device is slow). A process that exits or dies releases whatever it
// held.
type releaser struct {
	mu       sync.Mutex
	fds      []int
	last     time.Time // the latest release
	draining int       // WaitReleases callers: no holding back
	bytes    int64     // the space of fds (allocated blocks)
	wake     chan struct{}
	running  bool
	closing  int       // descriptors of the batch being closed
	idle     sync.Cond // broadcast when fds is empty and no close is under way
	limit    int       // the bound, worked out at first use (pendingLimit)
}

var releases = func() *releaser {
	r := &releaser{wake: make(chan struct{}, 1)}
	r.idle.L = &r.mu
	return r
}()

// releaseClock is the releaser's clock (tests stop it).
var releaseClock = time.Now

// releaseHook, when set (tests), is called by the releaser before each
// descriptor it closes.
var releaseHook atomic.Pointer[func()]

// inlineReleases counts the files released by their writer because the
// releaser held MaxPendingReleases (tests).
var inlineReleases atomic.Int64

// hold opens name in d without following it and without opening the file
// itself (O_PATH): the inode a rename over name is about to replace, or
// -1 when there is none (or it cannot be held: then the rename frees it
// as it always did).
func (d *Dir) hold(name string) int {
	fd, err := syscall.Openat(d.fd, name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

// release hands fd (from hold; -1 is ignored) to the releaser, or closes
// it at once when the releaser holds as many as it may.
func release(fd int) {
	if fd < 0 {
		return
	}
	var st syscall.Stat_t
	size := int64(MaxHeldBytes) // not known: not held back
	if syscall.Fstat(fd, &st) == nil {
		size = st.Blocks * 512
	}
	r := releases
	r.mu.Lock()
	if r.limit == 0 {
		r.limit = pendingLimit()
	}
	if len(r.fds)+r.closing >= r.limit {
		r.mu.Unlock()
		inlineReleases.Add(1)
		syscall.Close(fd)
		return
	}
	r.fds = append(r.fds, fd)
	r.bytes += size
	r.last = releaseClock()
	if len(r.fds) >= r.limit/2 || r.bytes >= MaxHeldBytes {
		select { // half the bound: no more holding back
		case r.wake <- struct{}{}:
		default:
		}
	}
	start := !r.running
	r.running = true
	r.mu.Unlock()
	if start {
		go r.run()
	}
}

// run closes the held descriptors until none is left, then ends (the next
// release starts it again): no goroutine outlives the work.
func (r *releaser) run() {
	var batch []int
	for {
		r.mu.Lock()
		r.closing = 0
		if len(r.fds) == 0 {
			r.running = false
			r.idle.Broadcast()
			r.mu.Unlock()
			return
		}
		// Held back while writes go on (see ReleaseQuiet), up to half
		// the bound and MaxHeldBytes.
		if wait := ReleaseQuiet - releaseClock().Sub(r.last); wait > 0 && r.draining == 0 && len(r.fds) < r.limit/2 && r.bytes < MaxHeldBytes {
			r.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-r.wake: // WaitReleases
				t.Stop()
			}
			continue
		}
		batch, r.fds = r.fds, batch[:0]
		r.bytes = 0
		r.closing = len(batch)
		r.mu.Unlock()
		for _, fd := range batch {
			if h := releaseHook.Load(); h != nil {
				(*h)()
			}
			syscall.Close(fd)
		}
	}
}

// pending is how many held files wait for release, those being closed
// included.
func (r *releaser) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.fds) + r.closing
}

// WaitReleases blocks until every file replaced so far by a write of this
// process is released (its old blocks given back to the filesystem).
func WaitReleases() {
	r := releases
	r.mu.Lock()
	defer r.mu.Unlock()
	r.draining++
	defer func() { r.draining-- }()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	for r.running || len(r.fds) > 0 {
		r.idle.Wait()
	}
}

// pendingLimit is MaxPendingReleases, or a quarter of the descriptor limit
// when that is lower (at least 1).
func pendingLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1
	}
	return int(max(min(uint64(MaxPendingReleases), rl.Cur/4), 1))
}

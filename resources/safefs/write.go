package safefs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// TempInfix follows the target's name in the temporary files of
// WriteFile: ".NAME.manifold-<slot>".
const TempInfix = ".manifold-"

// TempSlots is how many temporary files of one target can exist at once:
// writers of the same file at the same moment take the next free slot.
// Slots keep a write O(1) in the size of the directory: the leftovers of
// a killed writer are found by name, not by listing the directory.
const TempSlots = 8

// staleTempAge is how old an unlocked temporary file must be before it is
// removed as a dead writer's: a writer creates the file, then locks it.
const staleTempAge = 5 * time.Second

// WriteFile replaces path with data, safely against whoever can write the
// directories on the way: the parent is opened as OpenParent does, then
// (*Dir).WriteFile.
func WriteFile(path string, data []byte, mode fs.FileMode, uid, gid int) error {
	d, name, err := OpenParent(path)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.WriteFile(name, data, mode, uid, gid)
}

// WriteFile atomically replaces name in d with data: a temporary file
// ".NAME.manifold-<slot>" is created beside it with O_EXCL (never through
// a link), flock(2)ed, written, given mode and ownership (uid, gid -1: the
// process's) by descriptor, fsynced and renamed over name; the directory
// is then fsynced. A link at name is replaced, its target never opened.
// The unlocked temporary files of name that a killed writer left (older
// than 5 s) are removed first: slot 0's and the consecutive taken slots
// after it (see CreateTemp). Every writing resource type should write
// through it (file, document, scaffold, archive, user homes...).
func (d *Dir) WriteFile(name string, data []byte, mode fs.FileMode, uid, gid int) (err error) {
	return d.WriteFileStat(name, data, mode, uid, gid, nil)
}

// WriteFileStat is WriteFile; when st is not nil it is filled with an
// fstat of the file once renamed over name, as Group.AddStat's (zero when
// WriteFile fails or the fstat does).
func (d *Dir) WriteFileStat(name string, data []byte, mode fs.FileMode, uid, gid int, st *syscall.Stat_t) (err error) {
	if st != nil {
		*st = syscall.Stat_t{}
	}
	tmp, err := d.stage(name, data, mode, uid, gid)
	if err != nil {
		return err
	}
	tmpName := filepath.Base(tmp.Name())
	if err = tmp.Sync(); err != nil {
		tmp.Close()
		_ = syscall.Unlinkat(d.fd, tmpName)
		return err
	}
	// Renamed while still locked, then closed; the file it replaces is
	// held across the rename and released in the background (release).
	old := d.hold(name)
	if err = syscall.Renameat(d.fd, tmpName, d.fd, name); err != nil {
		if old >= 0 {
			syscall.Close(old)
		}
		tmp.Close()
		_ = syscall.Unlinkat(d.fd, tmpName)
		return &fs.PathError{Op: "rename", Path: d.join(name), Err: err}
	}
	if st != nil && syscall.Fstat(int(tmp.Fd()), st) != nil {
		*st = syscall.Stat_t{}
	}
	if err = tmp.Close(); err != nil && st != nil {
		*st = syscall.Stat_t{}
	}
	d.syncDir() // best effort: the rename is done either way
	release(old)
	return err
}

// stage creates a locked temporary file of name (CreateTemp) holding
// data, with mode and ownership (uid, gid -1: the process's) set by
// descriptor, not yet fsynced: the first half of WriteFile. On error
// nothing is left behind.
func (d *Dir) stage(name string, data []byte, mode fs.FileMode, uid, gid int) (_ *os.File, err error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	tmp, err := d.CreateTemp(name)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			_ = syscall.Unlinkat(d.fd, filepath.Base(tmp.Name()))
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return nil, err
	}
	if uid >= 0 && uid == os.Getuid() {
		uid = -1
	}
	if gid >= 0 && gid == os.Getgid() {
		gid = -1
	}
	if uid >= 0 || gid >= 0 {
		if err = tmp.Chown(uid, gid); err != nil {
			return nil, err
		}
	}
	if err = tmp.Chmod(mode); err != nil {
		return nil, err
	}
	return tmp, nil
}

// dirSyncs counts syncDir's fsyncs (tests).
var dirSyncs atomic.Int64

// syncDir fsyncs the directory, making the renames in it durable; best
// effort.
func (d *Dir) syncDir() {
	dirSyncs.Add(1)
	if fd, err := syscall.Openat(d.fd, ".", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err == nil {
		_ = syscall.Fsync(fd)
		syscall.Close(fd)
	}
}

// TempName is slot k of the temporary files of name.
func TempName(name string, k int) string { return "." + name + TempInfix + strconv.Itoa(k) }

// CreateTemp removes the temporary files of name that a killed writer
// left in slot 0 and in each slot after a taken one (a writer takes the
// lowest free slot, so one in slot k saw slots 0..k-1 taken: the probe
// stops at the first free slot), then creates one in the first free slot (with every slot taken by
// live writers, a name of its own) and locks it (flock, held until the
// file is closed). Its Name is the temporary file's full path.
func (d *Dir) CreateTemp(name string) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	// The common case, slot 0 free: it is created at once (the probe
	// below would have stopped there, having found nothing to remove).
	if f, err := d.createTemp(TempName(name, 0)); err == nil || !errors.Is(err, syscall.EEXIST) {
		return f, err
	}
	// Slots are taken lowest first, so a writer only ever took slot k
	// while slots 0..k-1 existed: the probe stops at the first free slot
	// (not TempSlots). A killed writer's leftover in slot k is thus
	// removed by the next write that finds the slots below it taken, at
	// most TempSlots files per target.
	for k := range TempSlots {
		if !d.removeIfStale(TempName(name, k)) {
			break
		}
	}
	for k := range TempSlots + 1 {
		tmpName := TempName(name, k)
		if k == TempSlots {
			// Every slot taken by a live writer: a name of our own.
			tmpName = "." + name + TempInfix + "x" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		}
		f, err := d.createTemp(tmpName)
		if errors.Is(err, syscall.EEXIST) && k < TempSlots {
			continue
		}
		return f, err
	}
	panic("unreachable")
}

// createTemp creates tmpName in d (O_EXCL, never through a link, 0600)
// and locks it. An error wraps the create's errno (EEXIST: taken).
func (d *Dir) createTemp(tmpName string) (*os.File, error) {
	fd, err := syscall.Openat(d.fd, tmpName, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: d.join(tmpName), Err: err}
	}
	if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
		syscall.Close(fd)
		_ = syscall.Unlinkat(d.fd, tmpName)
		return nil, err
	}
	return os.NewFile(uintptr(fd), d.join(tmpName)), nil
}

// tempProbes counts the slots removeIfStale looked at (tests).
var tempProbes atomic.Int64

// removeIfStale removes name when it is a temporary file a killed writer
// left: a regular file, unlocked and older than staleTempAge. Best effort:
// a file it cannot judge is left. It reports whether name existed (then
// the next slot may hold a leftover too).
func (d *Dir) removeIfStale(name string) (existed bool) {
	tempProbes.Add(1)
	fd, err := syscall.Openat(d.fd, name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ENOENT) {
		return false // the common case
	}
	if err != nil {
		return true // a link, or not ours to judge
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG ||
		time.Since(time.Unix(st.Mtim.Unix())) < staleTempAge {
		return true
	}
	if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		_ = syscall.Unlinkat(d.fd, name)
	}
	return true
}

// LockName is the lock file (*Dir).Lock keeps beside name.
func LockName(name string) string { return "." + name + TempInfix + "lock" }

// lockPoll is how often Lock retries a lock another process holds.
const lockPoll = 5 * time.Millisecond

// Lock takes an exclusive flock(2) on the lock file ".NAME.manifold-lock"
// beside name (created 0600 when missing, never through a link, and kept:
// removing it would let two writers lock two different files) and returns
// its release. Writers that read, change and rewrite name hold it around
// the whole read-modify-write, so none loses another's update; the file
// itself cannot carry the lock, as each atomic write replaces its inode.
// Lock waits for the holder until ctx is done.
func (d *Dir) Lock(ctx context.Context, name string) (unlock func(), err error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	lockName := LockName(name)
	fd, err := syscall.Openat(d.fd, lockName, syscall.O_RDWR|syscall.O_CREAT|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("lock %s: %w", d.join(lockName), ErrSymlink)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "lock", Path: d.join(lockName), Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, fmt.Errorf("lock %s: not a regular file", d.join(lockName))
	}
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Close(fd) }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			syscall.Close(fd)
			return nil, &fs.PathError{Op: "flock", Path: d.join(lockName), Err: err}
		}
		select {
		case <-ctx.Done():
			syscall.Close(fd)
			return nil, fmt.Errorf("lock %s: %w", d.join(lockName), context.Cause(ctx))
		case <-t.C:
		}
	}
}

package safefs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
)

// MaxGroupFiles bounds the files of one Group: each holds an open, locked
// temporary file until Commit. Add past it is ErrGroupFull; callers
// commit and start another group.
const MaxGroupFiles = 256

// ErrGroupFull is the error of Add on a group of MaxGroupFiles files.
var ErrGroupFull = fmt.Errorf("write group full (%d files): commit it first", MaxGroupFiles)

// SyncMode is how a Group makes its temporary files durable.
type SyncMode string

const (
	// SyncFS makes them durable with one syncfs(2) per filesystem: one
	// journal commit and one cache flush for the whole group. It also
	// flushes whatever else is dirty on that filesystem. The default.
	SyncFS SyncMode = "syncfs"
	// SyncEach fsyncs each temporary file, after all were written.
	SyncEach SyncMode = "fsync"
)

// SyncModeEnv names the environment variable that chooses the SyncMode of
// groups ("syncfs", the default, or "fsync"): hosts whose filesystems
// carry a lot of other dirty data (a database) may prefer fsync.
const SyncModeEnv = "MANIFOLD_WRITE_SYNC"

// groupSync is the SyncMode of new groups.
var groupSync = func() SyncMode {
	if SyncMode(os.Getenv(SyncModeEnv)) == SyncEach {
		return SyncEach
	}
	return SyncFS
}()

// commitHook, when set (by tests), is called between the steps of Commit:
// "written" (every temporary file written, none synced), "synced",
// "renamed" after each rename with its index, "done" before the
// directories are fsynced.
var commitHook func(step string, i int)

func hook(step string, i int) {
	if commitHook != nil {
		commitHook(step, i)
	}
}

// Group writes several files, each atomically as (*Dir).WriteFile does,
// with their fsyncs grouped: Add creates, writes, chowns and chmods each
// temporary file (O_EXCL, flocked, never through a link, in a slot of
// the target's name); Commit makes them all durable at once, then renames
// each over its target (still locked) and fsyncs each directory once.
// A crash or kill at any moment leaves each target with its old or its
// new content, never a mix: a target is only ever replaced by a rename of
// a temporary file that is complete and durable. The temporary files a
// killed writer leaves are removed by the next write of their target, as
// WriteFile's.
//
// A Group keeps a descriptor of its own of each directory given to Add
// (closed by Commit and Abort), so callers may close theirs. A Group is
// used by one goroutine.
type Group struct {
	entries []groupEntry
	dirs    map[*Dir]*Dir
	mode    SyncMode
}

type groupEntry struct {
	d       *Dir // the group's own descriptor of the directory
	name    string
	tmpName string
	f       *os.File
	err     error
	st      *syscall.Stat_t // AddStat's: the renamed file's fstat, or zero
}

// Len is how many files were added.
func (g *Group) Len() int { return len(g.entries) }

// Add stages data as the new content of name in d (see Group). An error
// leaves nothing behind and the group as it was.
func (g *Group) Add(d *Dir, name string, data []byte, mode fs.FileMode, uid, gid int) error {
	return g.AddStat(d, name, data, mode, uid, gid, nil)
}

// AddStat is Add; when st is not nil, Commit fills it with an fstat of
// the file once renamed over name (the descriptor written through, so it
// is the file that holds data, with the change time the rename gave it),
// and zeroes it when that file is not the one at name, or may not hold
// data: its write failed, or the fstat did. A caller may compare it with
// a later lstat of name (same device, inode, size, mode, owner, times:
// the content is still data) instead of reading the file back.
func (g *Group) AddStat(d *Dir, name string, data []byte, mode fs.FileMode, uid, gid int, st *syscall.Stat_t) error {
	if st != nil {
		*st = syscall.Stat_t{}
	}
	if len(g.entries) >= MaxGroupFiles {
		return ErrGroupFull
	}
	own, ok := g.dirs[d]
	if !ok {
		fd, err := syscall.Dup(d.fd)
		if err != nil {
			return &fs.PathError{Op: "dup", Path: d.path, Err: err}
		}
		syscall.CloseOnExec(fd)
		own = &Dir{fd: fd, path: d.path}
	}
	tmp, err := own.stage(name, data, mode, uid, gid)
	if err != nil {
		if !ok {
			syscall.Close(own.fd)
		}
		return err
	}
	if !ok {
		if g.dirs == nil {
			g.dirs = map[*Dir]*Dir{}
		}
		g.dirs[d] = own
	}
	g.entries = append(g.entries, groupEntry{d: own, name: name, tmpName: filepath.Base(tmp.Name()), f: tmp, st: st})
	return nil
}

// closeDirs closes the group's own directory descriptors.
func (g *Group) closeDirs() {
	for _, own := range g.dirs {
		syscall.Close(own.fd)
	}
	g.dirs = nil
}

// Commit makes every staged file durable (see SyncMode; a syncfs that
// fails falls back to an fsync each, which names the file that failed),
// renames each over its target and makes the renames durable (SyncFS: one
// more syncfs per filesystem; SyncEach: an fsync of each directory). The
// files the renames replaced are released in the background (see
// release). It returns one error per Add, in order: nil when that file
// was replaced. A file whose fsync or rename failed is left as it was,
// its temporary file removed. The group is empty afterwards.
func (g *Group) Commit() []error {
	entries := g.entries
	g.entries = nil
	errs := make([]error, len(entries))
	if len(entries) == 0 {
		g.closeDirs()
		return errs
	}
	hook("written", len(entries))
	mode := cmpMode(g.mode)
	if mode == SyncFS && !syncFilesystems(stagedFiles(entries)) {
		mode = SyncEach
	}
	if mode == SyncEach {
		for i := range entries {
			if err := entries[i].f.Sync(); err != nil {
				entries[i].err = &fs.PathError{Op: "fsync", Path: entries[i].d.join(entries[i].tmpName), Err: unwrapPath(err)}
			}
		}
	}
	hook("synced", len(entries))
	renamed := entries[:0:0]
	held := make([]int, 0, len(entries)) // the replaced files, released once the renames are durable
	for i := range entries {
		e := &entries[i]
		if e.err == nil {
			old := e.d.hold(e.name)
			if err := syscall.Renameat(e.d.fd, e.tmpName, e.d.fd, e.name); err != nil {
				e.err = &fs.PathError{Op: "rename", Path: e.d.join(e.name), Err: err}
				if old >= 0 {
					syscall.Close(old) // not replaced: nothing to free
				}
			} else {
				if e.st != nil && syscall.Fstat(int(e.f.Fd()), e.st) != nil {
					*e.st = syscall.Stat_t{}
				}
				renamed = append(renamed, *e)
				held = append(held, old)
				hook("renamed", i)
				continue // closed once the renames are durable
			}
		}
		e.f.Close()
		_ = syscall.Unlinkat(e.d.fd, e.tmpName)
		errs[i] = e.err
	}
	hook("done", len(entries))
	// The renames made durable, best effort (the renames are done either
	// way), as WriteFile's: with SyncFS one syncfs per filesystem, not an
	// fsync of each directory (each its own journal commit while another
	// writer is busy on the filesystem).
	if len(renamed) > 0 && (mode != SyncFS || !syncFilesystems(stagedFiles(renamed))) {
		dirs := map[*Dir]bool{}
		for _, e := range renamed {
			if !dirs[e.d] {
				dirs[e.d] = true
				e.d.syncDir()
			}
		}
	}
	k := 0
	for i := range entries {
		if entries[i].err != nil {
			continue
		}
		if err := renamed[k].f.Close(); err != nil {
			errs[i] = err
			if renamed[k].st != nil {
				*renamed[k].st = syscall.Stat_t{}
			}
		}
		k++
	}
	for _, fd := range held {
		release(fd)
	}
	g.closeDirs()
	return errs
}

// Abort removes every staged temporary file; no target is touched. The
// group is empty afterwards.
func (g *Group) Abort() {
	for _, e := range g.entries {
		e.f.Close()
		_ = syscall.Unlinkat(e.d.fd, e.tmpName)
	}
	g.entries = nil
	g.closeDirs()
}

func cmpMode(m SyncMode) SyncMode {
	if m == "" {
		return groupSync
	}
	return m
}

// stagedFiles is one open temporary file of each directory of entries
// (a descriptor syncfs accepts: the directories' own are O_PATH).
func stagedFiles(entries []groupEntry) []int {
	var fds []int
	seen := map[*Dir]bool{}
	for i := range entries {
		if d := entries[i].d; !seen[d] {
			seen[d] = true
			fds = append(fds, int(entries[i].f.Fd()))
		}
	}
	return fds
}

// syncFilesystems runs syncfs(2) once per filesystem of fds (told apart
// by device number). It reports false when one failed or could not be
// told: the caller then fsyncs each file (or directory).
func syncFilesystems(fds []int) bool {
	seen := map[uint64]bool{}
	for _, fd := range fds {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return false
		}
		if seen[st.Dev] {
			continue
		}
		seen[st.Dev] = true
		if sysSyncfs == 0 {
			return false
		}
		fsSyncs.Add(1)
		for {
			_, _, errno := syscall.Syscall(sysSyncfs, uintptr(fd), 0, 0)
			if errno == syscall.EINTR {
				continue
			}
			if errno != 0 {
				return false
			}
			break
		}
	}
	return true
}

// fsSyncs counts the syncfs calls of groups (tests).
var fsSyncs atomic.Int64

// sysSyncfs is syncfs(2)'s number, which package syscall does not name;
// 0 on an architecture not listed here: groups then fsync each file.
var sysSyncfs = map[string]uintptr{"amd64": 306, "arm64": 267, "riscv64": 267, "loong64": 267, "386": 344, "arm": 373}[runtime.GOARCH]

// Package tmpdir picks where manifold makes the private, short-lived
// directories of one command: the embedded engine's store (which holds a
// lock file and the empty directories of a memory-storage JetStream) and
// the facts' view of the etc directory.
package tmpdir

import (
	"os"
	"syscall"
)

// Shm is the shared-memory file system of Linux: a tmpfs, world-writable
// with the sticky bit, like /tmp.
const Shm = "/dev/shm"

// Base returns the directory to make such directories in: the one TMPDIR
// names when it is set (os.TempDir), else Shm when this process may create
// entries there, else os.TempDir(). On a tmpfs creating and removing a
// directory costs no disk I/O: on the ext4 root of the development machine
// (mounted with discard) an embedded engine's store took some 4 ms of a
// one-shot apply's wall time to make and remove, and the facts' view 1 ms
// (docs/performance.md, "The fixed cost, round 2").
// It is looked up at each call (two system calls): tests set TMPDIR.
func Base() string { return pick(os.Getenv("TMPDIR"), Shm) }

// pick is Base with TMPDIR's value and the shared-memory directory given.
func pick(tmpdir, shm string) string {
	if tmpdir != "" {
		return os.TempDir()
	}
	if fi, err := os.Stat(shm); err == nil && fi.IsDir() && syscall.Access(shm, 0o2|0o1) == nil { // W_OK|X_OK
		return shm
	}
	return os.TempDir()
}

// Bases returns Base and, when it differs, os.TempDir(): where directories
// left by killed processes are looked for (earlier versions made them in
// os.TempDir()).
func Bases() []string {
	b := Base()
	if t := os.TempDir(); t != b {
		return []string{b, t}
	}
	return []string{b}
}

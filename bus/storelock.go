package bus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StoreLockFile is the lock file a server holds in its store directory
// while it runs: an exclusive flock(2), released by the kernel when the
// process ends however it ends, with the holder's pid as content.
const StoreLockFile = "manifold.lock"

// storeLock is a held lock on a store directory.
type storeLock struct{ f *os.File }

// lockStore creates dir if needed and takes its lock without waiting. A
// directory another live process holds is ErrStoreInUse, naming its pid.
func lockStore(dir string) (*storeLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("bus: store directory: %w", err)
	}
	path := filepath.Join(dir, StoreLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bus: store lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		data, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(data))
			if holder == "" {
				holder = "unknown"
			}
			return nil, fmt.Errorf("%w: %s is used by a running server (pid %s); give this one its own --store-dir", ErrStoreInUse, dir, holder)
		}
		return nil, fmt.Errorf("bus: store lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &storeLock{f: f}, nil
}

// release drops the lock. Safe on nil.
func (l *storeLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}

// storeLockGrace is how old an unheld lock file must be before its store
// counts as abandoned: a server creates the file and then locks it, and
// must not lose its directory in between.
const storeLockGrace = 10 * time.Second

// StoreAbandoned reports whether dir is a store directory whose server is
// gone: it holds a lock file, written more than 10 seconds ago, that no
// live process holds. A directory without a lock file is not reported
// (its server may be starting).
func StoreAbandoned(dir string) bool {
	path := filepath.Join(dir, StoreLockFile)
	info, err := os.Lstat(path)
	if err != nil || !info.Mode().IsRegular() || time.Since(info.ModTime()) < storeLockGrace {
		return false
	}
	f, err := os.OpenFile(path, os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}

package resources

import (
	"context"
	"fmt"
	"sync"
)

// packageLocks holds one single-slot semaphore per package manager.
var packageLocks sync.Map // manager name → chan struct{}

// LockPackageManager takes the process-wide lock of one package manager
// ("apt", "dnf"), so a worker runs one operation of that manager at a time
// however many tasks it runs in parallel: apt-get and dpkg refuse to run
// concurrently, and queries racing an install read half-written databases.
// It blocks until the lock is free or ctx is done (then it returns ctx's
// cause). Call unlock exactly once.
//
// The lock covers this process only. Against other processes (another
// worker on the same host, an administrator's apt-get) the providers rely on
// the manager's own lock: apt-get is run with -o DPkg::Lock::Timeout so it
// waits for dpkg's lock instead of failing, and dnf waits for its own.
func LockPackageManager(ctx context.Context, manager string) (unlock func(), err error) {
	if ctx.Err() != nil {
		return nil, fmt.Errorf("wait for the %s lock: %w", manager, context.Cause(ctx))
	}
	v, _ := packageLocks.LoadOrStore(manager, make(chan struct{}, 1))
	sem := v.(chan struct{})
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the %s lock: %w", manager, context.Cause(ctx))
	}
	var once sync.Once
	return func() { once.Do(func() { <-sem }) }, nil
}

package safefs

import "time"

// SetCommitHook sets the hook Group.Commit calls between its steps (nil
// removes it).
func SetCommitHook(f func(step string, i int)) { commitHook = f }

// SetGroupSync sets the SyncMode of g.
func SetGroupSync(g *Group, m SyncMode) { g.mode = m }

// ReachWalks is how many walks ReachableByOthers made so far.
func ReachWalks() int64 { return reachWalks.Load() }

// TempProbes is how many temporary slots were probed for leftovers so far.
func TempProbes() int64 { return tempProbes.Load() }

// Syncs is how many directory fsyncs and syncfs calls writes made so far.
func Syncs() (dirs, filesystems int64) { return dirSyncs.Load(), fsSyncs.Load() }

// SetReleaseHook sets the hook the releaser calls before each descriptor
// it closes (nil removes it).
func SetReleaseHook(f func()) {
	if f == nil {
		releaseHook.Store(nil)
		return
	}
	releaseHook.Store(&f)
}

// SetReleaseLimit sets the releaser's bound (0: worked out again) and
// returns the one it had.
func SetReleaseLimit(n int) int {
	releases.mu.Lock()
	defer releases.mu.Unlock()
	old := releases.limit
	releases.limit = n
	return old
}

// PendingReleases is how many replaced files wait for release.
func PendingReleases() int { return releases.pending() }

// InlineReleases is how many replaced files their writer released itself
// (the releaser was full).
func InlineReleases() int64 { return inlineReleases.Load() }

// SetReleaseClock sets the releaser's clock (nil: time.Now).
func SetReleaseClock(f func() time.Time) {
	releases.mu.Lock()
	defer releases.mu.Unlock()
	if f == nil {
		f = time.Now
	}
	releaseClock = f
}

// SetDirsClock sets c's clock of rechecks (see DirsRecheck).
func SetDirsClock(c *Dirs, now func() time.Duration) { c.now = now }

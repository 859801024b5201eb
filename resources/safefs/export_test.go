package safefs

// SetCommitHook sets the hook Group.Commit calls between its steps (nil
// removes it).
func SetCommitHook(f func(step string, i int)) { commitHook = f }

// SetGroupSync sets the SyncMode of g.
func SetGroupSync(g *Group, m SyncMode) { g.mode = m }

// ReachWalks is how many walks ReachableByOthers made so far.
func ReachWalks() int64 { return reachWalks.Load() }

// TempProbes is how many temporary slots were probed for leftovers so far.
func TempProbes() int64 { return tempProbes.Load() }

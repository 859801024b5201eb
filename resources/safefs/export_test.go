package safefs

// SetCommitHook sets the hook Group.Commit calls between its steps (nil
// removes it).
func SetCommitHook(f func(step string, i int)) { commitHook = f }

// SetGroupSync sets the SyncMode of g.
func SetGroupSync(g *Group, m SyncMode) { g.mode = m }

// ReachWalks is how many walks ReachableByOthers made so far.
func ReachWalks() int64 { return reachWalks.Load() }

package scaffold

import "github.com/manifold-run/manifold/resources"

var _ resources.Watcher = (*Scaffold)(nil)

// WatchTargets is the target tree: a file written, removed or added
// anywhere in it (a purged extra file coming back) is drift.
func (s *Scaffold) WatchTargets() []resources.WatchTarget {
	return []resources.WatchTarget{{Path: s.target, Tree: true}}
}

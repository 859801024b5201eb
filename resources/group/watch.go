package group

import "github.com/manifold-run/manifold/resources"

var _ resources.Watcher = (*Group)(nil)

// WatchTargets is the group database (groupadd, groupmod and hand edits
// end in a write or a rename over it).
func (g *Group) WatchTargets() []resources.WatchTarget {
	return []resources.WatchTarget{{Path: g.file}}
}

package archive

import (
	"path/filepath"

	"github.com/manifold-run/manifold/resources"
)

var _ resources.Watcher = (*Archive)(nil)

// WatchTargets are the archive file and its `creates` path: either
// removed or replaced is drift. The extracted tree is not watched (it is
// the application's to change).
func (a *Archive) WatchTargets() []resources.WatchTarget {
	t := []resources.WatchTarget{{Path: a.path}}
	if c := a.props.Creates; c != "" && filepath.IsAbs(c) {
		t = append(t, resources.WatchTarget{Path: c})
	}
	return t
}

package exec

import (
	"path/filepath"

	"github.com/manifold-run/manifold/resources"
)

var _ resources.Watcher = (*Exec)(nil)

// WatchTargets is the `creates` path, when absolute: a command has no
// state of its own to watch, but the file it creates going away is drift
// (the command runs again). Without one, the interval covers it.
func (e *Exec) WatchTargets() []resources.WatchTarget {
	if c := e.props.Creates; c != "" && filepath.IsAbs(c) {
		return []resources.WatchTarget{{Path: c}}
	}
	return nil
}

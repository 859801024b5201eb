package file

import "github.com/manifold-run/manifold/resources"

var _ resources.Watcher = (*File)(nil)

// WatchTargets is the file's path: a write, a removal, a rename over it, a
// chmod or chown, or a link planted in its place is drift (a directory's
// own entries are not: only the directory itself is managed).
func (f *File) WatchTargets() []resources.WatchTarget {
	return []resources.WatchTarget{{Path: f.Path}}
}

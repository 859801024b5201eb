package worker

import (
	"io/fs"
	"strconv"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
)

// assumed converts a noop task's bus.Assume for the engine; nil outside
// noop. A directory whose mode is unmanaged or unreadable is taken as
// 0755, the mode the file resource gives a new directory.
func assumed(task *bus.Task) *resources.Assumed {
	a := task.Assume
	if !task.Noop || a.Empty() {
		return nil
	}
	out := &resources.Assumed{Users: a.Users, Groups: a.Groups, Packages: a.Packages}
	if len(a.Directories) > 0 {
		out.Dirs = make(map[string]fs.FileMode, len(a.Directories))
		for p, m := range a.Directories {
			mode := fs.FileMode(0o755)
			if n, err := strconv.ParseUint(m, 8, 32); err == nil {
				mode = fs.FileMode(n) & fs.ModePerm
			}
			out.Dirs[p] = mode
		}
	}
	return out
}

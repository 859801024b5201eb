package resources

import (
	"io/fs"
	"path/filepath"
	"slices"
)

// Assumed is what a noop execution takes as already there: what other
// resources of the run would have created before this one, had the run
// not been a noop (a directory for a file, the user owning it, the
// package of a service). Types consult it only where their check would
// otherwise fail on something missing, so that a dry run on a new host
// answers "would create" rather than "parent directory ... does not
// exist". Env.Assume is nil outside noop; a nil *Assumed assumes nothing.
type Assumed struct {
	// Dirs maps a directory the run would create to the mode it would
	// get (0755 when the manifest leaves the mode unmanaged).
	Dirs map[string]fs.FileMode
	// Users, Groups and Packages the run would create or install.
	Users, Groups, Packages []string
}

// Dir reports whether the run would create directory p, and its mode.
func (a *Assumed) Dir(p string) (fs.FileMode, bool) {
	if a == nil {
		return 0, false
	}
	m, ok := a.Dirs[filepath.Clean(p)]
	return m, ok
}

// User reports whether the run would create user name.
func (a *Assumed) User(name string) bool {
	return a != nil && name != "" && slices.Contains(a.Users, name)
}

// Group reports whether the run would create group name.
func (a *Assumed) Group(name string) bool {
	return a != nil && name != "" && slices.Contains(a.Groups, name)
}

// Package reports whether the run would install package name.
func (a *Assumed) Package(name string) bool {
	return a != nil && name != "" && slices.Contains(a.Packages, name)
}

// Assumed returns what this noop execution may assume (see Assumed); nil
// outside noop or when e is nil.
func (e *Env) Assumed() *Assumed {
	if e == nil || !e.Noop {
		return nil
	}
	return e.Assume
}

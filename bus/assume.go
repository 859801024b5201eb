package bus

// Assume is what a noop run takes as already there when it checks one
// resource: what other resources of the same run would create before it,
// had the run not been a noop. Without it a dry run on a new host fails
// every file whose directory the run itself would create ("parent
// directory ... does not exist"), and every resource after them is skipped.
//
// The coordinator fills it for noop tasks only, with the entries the
// resource's own check needs (its parent directories, owner, group,
// package), never the whole manifest's.
type Assume struct {
	// Directories maps a directory a file resource of the run would
	// create (ensure: directory) to its mode ("0755"; empty when the
	// manifest leaves it unmanaged).
	Directories map[string]string `json:"directories,omitempty"`
	// Users, Groups and Packages are accounts and packages user, group
	// and package resources of the run would create or install.
	Users    []string `json:"users,omitempty"`
	Groups   []string `json:"groups,omitempty"`
	Packages []string `json:"packages,omitempty"`
}

// Empty reports whether a assumes nothing.
func (a *Assume) Empty() bool {
	return a == nil || len(a.Directories) == 0 && len(a.Users) == 0 && len(a.Groups) == 0 && len(a.Packages) == 0
}

package user

import "github.com/manifold-run/manifold/resources"

var _ resources.Watcher = (*User)(nil)

// ShadowFile is the shadow password database, watched beside passwd and
// group (a password or expiry changed by hand is written there).
const ShadowFile = "/etc/shadow"

// WatchTargets are the account databases: useradd, usermod, vipw and
// hand edits all end in a write or a rename over one of them.
func (u *User) WatchTargets() []resources.WatchTarget {
	return []resources.WatchTarget{{Path: u.passwdFile}, {Path: u.groupFile}, {Path: ShadowFile}}
}

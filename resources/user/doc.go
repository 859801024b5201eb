// Package user is the user resource type: a local user account present or
// absent, with its uid, primary group, supplementary groups, home, shell
// and comment, managed with useradd, usermod and userdel through
// Env.Runner.
//
// The current state is read from the passwd and group database files
// (/etc/passwd, /etc/group); names, ids and fields are validated before any
// command runs, so nothing a manifest holds reaches a shell or an option.
//
// Root, any account of uid 0 and the account the worker runs as are never
// removed or renumbered (ErrProtectedAccount), and a home that is a
// symbolic link is never created, moved, re-owned or removed through
// (ErrLinkedHome).
package user

// Package group is the group resource type: a local group present or
// absent, with an optional fixed gid, managed with groupadd, groupmod and
// groupdel through Env.Runner.
//
// The current state is read from the group database file (/etc/group).
// The package also holds what the user type shares with it: the account
// name rules (CheckName), numeric IDs as manifests write them (ID) and the
// group database reader (ReadFile).
package group

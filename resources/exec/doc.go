// Package exec is the exec resource type: it runs a command, guarded the way
// CCM and Puppet guard it.
//
// Properties (CCM's): command (defaults to the resource's name), cwd,
// environment ("KEY=VALUE" entries), path (replaces PATH), returns (accepted
// exit codes, default [0]), creates (a path; the command does not run when
// it exists), onlyif (a command; run only when it exits 0), unless (a
// command; run only when it exits non-zero), refreshonly (run only when a
// subscribed resource changed) and logoutput (put the command's output in
// the result message).
//
// Two providers run the command line: posix (the default) splits it into
// argv with shell-like quoting (single and double quotes, backslash escapes)
// and runs the program directly, with no shell features (no pipes,
// redirections, variables or globbing); shell runs it with /bin/sh -c. The
// guards onlyif and unless use the same provider, cwd, environment and path
// as the command.
//
// Check (CheckApply with apply false) runs the guards, which must be
// read-only, and reports whether the command would run; apply evaluates the
// guards again and runs the command. There is no timeout property: the
// command is killed, with its whole process group, when ctx ends.
package exec

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
// Check (CheckApply with apply false) runs the guards, in noop too, so they
// must be read-only, and reports whether the command would run; apply
// evaluates the guards again and runs the command. Precedence, as in CCM: a
// refresh runs the command whatever creates and the guards say; otherwise
// an existing creates skips the command without running the guards.
//
// logoutput puts the output (stdout then stderr) in the result message and
// logs it on Env.Logger; it is bounded to its last MaxOutputBytes behind a
// "[manifold: N bytes of output truncated]" line, as is each stream of an
// ExitError. The common timeout property is the deadline of ctx: when it
// passes, the command is killed with its whole process group (children it
// forked included).
package exec

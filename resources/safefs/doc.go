// Package safefs writes, reads, chmods and removes files for resource types
// that must never be turned against the host by whoever can write a
// directory on the way: a user who owns /home/alice can plant
// /home/alice/app -> /root (a symlinked parent) or
// /home/alice/app.json -> /etc/shadow (a link at the managed path).
//
// Every operation starts from a Dir opened by walking the path from "/"
// one component at a time with O_NOFOLLOW, so no name is resolved twice:
//
//   - a symbolic link on the way is followed only when it is owned by root
//     or by this process's user (who could have written there anyway);
//     any other is refused with a *LinkError (errors.Is ErrUntrustedLink);
//   - the last component is opened relative to the directory's descriptor
//     with O_NOFOLLOW: a link there is never read, written, chmodded or
//     chowned through (ErrSymlink);
//   - writes go to a temporary file created with O_EXCL beside the target,
//     given its mode and owner by descriptor, fsynced and renamed over the
//     target (which replaces a link, never its target).
//
// ReadableByOthers tells whether an unprivileged user could read a file,
// the rule for showing its content in diffs.
//
// The package is Linux-only: it relies on O_PATH and /proc/self/fd.
package safefs

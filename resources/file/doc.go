// Package file is the `file` resource type: a regular file with content, a
// directory, or the absence of either, with optional mode, owner and group.
//
// Properties (CCM's names, plus Puppet's links, show_diff and sensitive):
//
//	ensure:    present (default) | absent | directory
//	content:   the file's content (string)
//	source:    a file to copy the content from, relative to Env.WorkDir (the
//	           manifest's directory); never outside it
//	mode:      octal permissions, "0644" (setuid/setgid/sticky allowed)
//	owner:     user name or numeric uid
//	group:     group name or numeric gid
//	force:     with ensure absent, remove a non-empty directory
//	links:     manage (default) | follow
//	show_diff: show diffs of files that are not world-readable (true), or
//	           never show diffs (false)
//	sensitive: redact content from diffs (sizes only)
//
// Unset mode, owner and group are left as they are (a new file gets 0644, a
// new directory 0755, owned by the worker's user). Without content or source
// the resource is attribute-only: a present file is created empty when
// missing and its content is never touched; only owner, group and mode are
// enforced. Content is written atomically: a temporary file created with
// O_EXCL in the same directory, given its owner and mode by descriptor,
// fsynced, then renamed over the target. Like CCM, the parent directory must
// exist; it is never created.
//
// # Source
//
// A relative source resolves against Env.WorkDir; an absolute one must lie
// inside it. A source that leaves the directory ("..", an absolute path
// elsewhere, a symbolic link leading out, checked after templates are
// rendered, on the worker) fails with ErrSourceOutside. Sources are read up
// to MaxContentBytes.
//
// # Symbolic links
//
// With links: manage (the default) nothing is ever written, chowned or
// chmodded through a symbolic link at the managed path:
//   - with content or source, the link itself is replaced by the file (the
//     rename swaps the directory entry); its target, dangling or not, inside
//     the tree or out, is never opened;
//   - attribute-only and ensure directory refuse the link (ErrSymlink), since
//     changing it would change its target;
//   - ensure absent removes the link, not its target; force never follows
//     links inside a removed tree.
//
// Owner and mode of an existing file are changed through a descriptor opened
// with O_NOFOLLOW whose device and inode must be the ones checked
// (ErrChanged otherwise), so a link planted between check and apply is not
// followed. Intermediate directories of the path are followed as the kernel
// resolves them: whoever can write a parent directory can replace the
// managed file after manifold wrote it, but cannot make manifold write or
// chmod anything else. With links: follow, the link's (existing) target is
// managed and the link kept; a dangling link is an error.
//
// # Diffs
//
// A content change carries a line diff (3 lines of context) for text up to
// 256 KiB and 1,000 lines, a size and hash summary otherwise (binary
// content has no line diff). The diff is cut at MaxDiffBytes with a
// "[manifold: diff truncated: N more bytes]" line. Diffs of files that are
// not world-readable, before or after the change, are replaced by a note
// unless show_diff is true; sensitive replaces every diff by the sizes.
package file

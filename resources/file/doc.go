// Package file is the `file` resource type: a regular file with content, a
// directory, or the absence of either, with optional mode, owner and group.
//
// Properties (CCM's names):
//
//	ensure:  present (default) | absent | directory
//	content: the file's content (string)
//	source:  a file to copy the content from, relative to Env.WorkDir
//	mode:    octal permissions, "0644" (setuid/setgid/sticky allowed)
//	owner:   user name or numeric uid
//	group:   group name or numeric gid
//
// Unset mode, owner and group are left as they are (a new file gets 0644, a
// new directory 0755, owned by the worker's user). Without content or source
// a present file is created empty when missing and its content is not
// managed. Content is written atomically: a temporary file in the same
// directory, fsynced, then renamed over the target. Like CCM, the parent
// directory must exist; it is never created. A non-empty directory is never
// removed.
package file

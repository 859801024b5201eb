package scaffold

import "errors"

var (
	// ErrSourceOutside is the error of a source directory, a partial passed
	// to render() or a file passed to write() that leaves its directory (an
	// absolute path elsewhere, "..", a symbolic link leading out).
	ErrSourceOutside = errors.New("path outside the allowed directory")
	// ErrTooLarge is the error of a scaffold past one of the limits
	// (MaxTemplates, MaxFileBytes, MaxTotalBytes, MaxTargetEntries,
	// MaxDepth). Nothing is written.
	ErrTooLarge = errors.New("scaffold too large")
	// ErrSymlink is the error of a symbolic link where the target needs a
	// directory (the target itself or a directory on a file's path): it is
	// never followed.
	ErrSymlink = errors.New("symbolic link in the target")
	// ErrRender is the error of a template that fails to parse or execute.
	// Nothing is written.
	ErrRender = errors.New("template failed")
	// ErrPost is the error of a post command that could not run or exited
	// non-zero.
	ErrPost = errors.New("post command failed")
)

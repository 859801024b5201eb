package file

import (
	"errors"

	"github.com/manifold-run/manifold/resources/safefs"
)

var (
	// ErrSourceOutside is the error of a source that resolves outside the
	// manifest's directory (a ".." escape, an absolute path elsewhere, or a
	// symbolic link leading out).
	ErrSourceOutside = errors.New("source must stay inside the manifest bundle")
	// ErrSymlink is the error of a symbolic link at a path managed without
	// content (attribute-only, or ensure directory) while links are managed:
	// changing it would change the link's target. Set links: follow to
	// manage the target, or content or source to replace the link.
	ErrSymlink = errors.New("refusing to change a file through a symlink (set links: follow to manage its target)")
	// ErrTooLarge is the error of a source larger than MaxContentBytes.
	ErrTooLarge = errors.New("content too large")
	// ErrChanged is the error of a path replaced between check and apply
	// (safefs.ErrChanged).
	ErrChanged = safefs.ErrChanged
)

package safefs

import (
	"errors"
	"fmt"
)

var (
	// ErrUntrustedLink is the error of a symbolic link on the way to a
	// managed path that is owned by neither root nor this process's user:
	// its owner could point it anywhere, so it is never followed.
	ErrUntrustedLink = errors.New("refusing to follow a symlink owned by another user")
	// ErrSymlink is the error of a symbolic link at the managed path itself
	// where a file or directory must be opened: it is never followed.
	ErrSymlink = errors.New("refusing to open a managed path through a symlink")
	// ErrChanged is the error of a path replaced between check and apply.
	ErrChanged = errors.New("path changed while it was being applied")
)

// LinkError is an untrusted symbolic link on the way to Path.
type LinkError struct {
	// Path is the managed path being opened.
	Path string
	// Link is the symbolic link, as reached from "/".
	Link string
	// Target is what the link points to.
	Target string
	// UID owns the link.
	UID int
}

func (e *LinkError) Error() string {
	return fmt.Sprintf("%s: %s is a symlink to %s owned by uid %d, neither root nor this process's user: %v",
		e.Path, e.Link, e.Target, e.UID, ErrUntrustedLink)
}

// Unwrap returns ErrUntrustedLink.
func (e *LinkError) Unwrap() error { return ErrUntrustedLink }

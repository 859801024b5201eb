package safefs

import (
	"os"
	"syscall"
)

// Rename moves name in d to toName in to, as renameat(2) relative to both
// descriptors: neither is followed when it is a symbolic link (a link is
// moved itself; a link at toName is replaced, its target never touched).
// Both directories must be on one filesystem. d and to may be the same.
func (d *Dir) Rename(name string, to *Dir, toName string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := checkName(toName); err != nil {
		return err
	}
	if err := syscall.Renameat(d.fd, name, to.fd, toName); err != nil {
		return &os.LinkError{Op: "rename", Old: d.join(name), New: to.join(toName), Err: err}
	}
	return nil
}

package file

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/manifold-run/manifold/resources/safefs"
)

// handle is a file or directory opened without following a final symbolic
// link, so ownership and mode change the inode that was checked, never what
// a link planted since points to.
type handle struct {
	f *os.File
	// byPath is true for an O_PATH descriptor (a file the worker may not
	// read, such as a 0200 file of a non-root worker): its mode and owner
	// are changed through /proc/self/fd, which names that very inode.
	byPath bool
}

// openIn opens name in d without following it when it is a symbolic
// link, and checks it is still the inode checked (same device and inode
// number). d was opened without following an untrusted link on the way
// (see package safefs).
func openIn(d *safefs.Dir, name string, checked fs.FileInfo) (*handle, error) {
	f, byPath, err := d.Open(name, syscall.O_RDONLY, checked)
	if errors.Is(err, safefs.ErrSymlink) {
		return nil, fmt.Errorf("%s: %w (a symlink appeared)", filepath.Join(d.Path(), name), ErrChanged)
	}
	if err != nil {
		return nil, err
	}
	return &handle{f: f, byPath: byPath}, nil
}

// Close closes the descriptor.
func (h *handle) Close() error { return h.f.Close() }

func (h *handle) procPath() string {
	return filepath.Join("/proc/self/fd", strconv.Itoa(int(h.f.Fd())))
}

func (h *handle) chown(uid, gid int) error {
	if h.byPath {
		return os.Chown(h.procPath(), uid, gid)
	}
	return h.f.Chown(uid, gid)
}

func (h *handle) chmod(mode os.FileMode) error {
	if h.byPath {
		return os.Chmod(h.procPath(), mode)
	}
	return h.f.Chmod(mode)
}

// readNoFollow reads the regular file name in d, checked as checked,
// without following a final symbolic link (a link appeared since the
// check is ErrChanged). It reads at most MaxContentBytes+1 bytes, enough
// to tell the content differs from any content manifold writes.
func readNoFollow(d *safefs.Dir, name string, checked fs.FileInfo) ([]byte, error) {
	b, err := d.ReadFile(name, checked, MaxContentBytes+1)
	if errors.Is(err, safefs.ErrSymlink) {
		return nil, fmt.Errorf("%s: %w (a symlink appeared)", filepath.Join(d.Path(), name), ErrChanged)
	}
	return b, err
}

// readSource reads src, relative to workDir (the process's working
// directory when empty) or absolute inside it. Paths that leave workDir by
// "..", by being elsewhere or through a symbolic link are ErrSourceOutside;
// os.Root enforces the last. Sources larger than MaxContentBytes are
// refused.
func readSource(rootDir, workDir, src string) ([]byte, error) {
	if workDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		workDir = wd
	}
	base := rootDir
	if base == "" {
		base = workDir
	}
	abs := src
	if !filepath.IsAbs(src) {
		abs = filepath.Join(workDir, src)
	}
	rel, err := filepath.Rel(base, abs)
	if err != nil {
		return nil, ErrSourceOutside
	}
	if !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("%w (%s)", ErrSourceOutside, base)
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Err.Error() == "path escapes from parent" {
			return nil, fmt.Errorf("%w (%s): %w", ErrSourceOutside, base, err)
		}
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxContentBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxContentBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrTooLarge, MaxContentBytes)
	}
	return b, nil
}

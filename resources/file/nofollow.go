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

// openNoFollow opens path without following a final symbolic link and
// checks it is still the inode checked (same device and inode number).
func openNoFollow(path string, checked fs.FileInfo) (*handle, error) {
	flags := syscall.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	h := &handle{}
	fd, err := syscall.Open(path, flags, 0)
	if errors.Is(err, syscall.EACCES) {
		fd, err = syscall.Open(path, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		h.byPath = true
	}
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s: %w (a symlink appeared)", path, ErrChanged)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	h.f = os.NewFile(uintptr(fd), path)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		h.Close()
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if want, ok := checked.Sys().(*syscall.Stat_t); ok && (want.Dev != st.Dev || want.Ino != st.Ino) {
		h.Close()
		return nil, fmt.Errorf("%s: %w", path, ErrChanged)
	}
	return h, nil
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

// readNoFollow reads the regular file at path, checked as checked, without
// following a final symbolic link. It reads at most MaxContentBytes+1 bytes,
// enough to tell the content differs from any content manifold writes.
func readNoFollow(path string, checked fs.FileInfo) ([]byte, error) {
	h, err := openNoFollow(path, checked)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	if h.byPath {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fs.ErrPermission}
	}
	return io.ReadAll(io.LimitReader(h.f, MaxContentBytes+1))
}

// readSource reads src, relative to workDir (the process's working
// directory when empty) or absolute inside it. Paths that leave workDir by
// "..", by being elsewhere or through a symbolic link are ErrSourceOutside;
// os.Root enforces the last. Sources larger than MaxContentBytes are
// refused.
func readSource(workDir, src string) ([]byte, error) {
	base := workDir
	if base == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		base = wd
	}
	rel := src
	if filepath.IsAbs(src) {
		r, err := filepath.Rel(base, src)
		if err != nil {
			return nil, ErrSourceOutside
		}
		rel = r
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

// oPath is Linux's O_PATH, which package syscall does not name: a
// descriptor that names an inode without opening it for reading.
const oPath = 0x200000

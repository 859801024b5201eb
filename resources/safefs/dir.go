package safefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// oPath is Linux's O_PATH, which package syscall does not name: a
// descriptor that names an inode without opening it for reading.
const oPath = 0x200000

// maxLinks bounds the symbolic links followed while walking one path, as
// the kernel's own limit (ELOOP past it).
const maxLinks = 40

// Dir is a directory opened by descriptor (see the package comment); names
// given to its methods are single path elements, never followed when they
// are symbolic links. Close it when done.
type Dir struct {
	fd   int
	root *os.Root
	path string
	// shared is set on a Dir a Dirs cache keeps: Close leaves it open.
	shared bool
}

// OpenDir opens the existing directory path (absolute), following only
// trusted symbolic links on the way, the last component included.
// A missing component is an error wrapping fs.ErrNotExist.
func OpenDir(path string) (*Dir, error) { return walk(path, false, 0) }

// MkdirAll is OpenDir that creates missing directories with perm (less the
// umask), as os.MkdirAll does but without following untrusted links.
func MkdirAll(path string, perm fs.FileMode) (*Dir, error) { return walk(path, true, perm) }

// OpenParent opens the directory holding path and returns it with path's
// last element.
func OpenParent(path string) (*Dir, string, error) {
	if !filepath.IsAbs(path) {
		return nil, "", fmt.Errorf("%s: not an absolute path", path)
	}
	path = filepath.Clean(path)
	if path == "/" {
		return nil, "", errors.New(`"/" has no parent directory`)
	}
	d, err := OpenDir(filepath.Dir(path))
	if err != nil {
		return nil, "", err
	}
	return d, filepath.Base(path), nil
}

func walk(path string, create bool, perm fs.FileMode) (*Dir, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s: not an absolute path", path)
	}
	fd, err := syscall.Open("/", oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: "/", Err: err}
	}
	closeFD := func() { syscall.Close(fd) }
	cur := "/"
	rest := strings.Split(path, "/")
	for links := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		if c == "" || c == "." {
			continue
		}
		next, err := syscall.Openat(fd, c, oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if errors.Is(err, syscall.ENOENT) && create {
			if err = syscall.Mkdirat(fd, c, uint32(perm.Perm())); err == nil || errors.Is(err, syscall.EEXIST) {
				next, err = syscall.Openat(fd, c, oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
			}
		}
		if errors.Is(err, syscall.ENOTDIR) {
			target, uid, isLink, lerr := readLink(fd, c)
			if lerr != nil {
				closeFD()
				return nil, &fs.PathError{Op: "open", Path: filepath.Join(cur, c), Err: lerr}
			}
			if isLink {
				if uid != 0 && uid != os.Geteuid() {
					closeFD()
					return nil, &LinkError{Path: path, Link: filepath.Join(cur, c), Target: target, UID: uid}
				}
				if links++; links > maxLinks {
					closeFD()
					return nil, &fs.PathError{Op: "open", Path: path, Err: syscall.ELOOP}
				}
				if filepath.IsAbs(target) {
					root, err := syscall.Open("/", oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
					if err != nil {
						closeFD()
						return nil, &fs.PathError{Op: "open", Path: "/", Err: err}
					}
					closeFD()
					fd, cur = root, "/"
				}
				rest = append(strings.Split(target, "/"), rest...)
				continue
			}
		}
		if err != nil {
			closeFD()
			return nil, &fs.PathError{Op: "open", Path: filepath.Join(cur, c), Err: err}
		}
		closeFD()
		fd = next
		if c == ".." {
			cur = filepath.Dir(cur)
		} else {
			cur = filepath.Join(cur, c)
		}
	}
	root, err := os.OpenRoot(procPath(fd))
	if err != nil {
		closeFD()
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return &Dir{fd: fd, root: root, path: filepath.Clean(path)}, nil
}

// readLink reads the symbolic link name in dirfd without following it and
// tells who owns it; isLink is false when name is something else.
func readLink(dirfd int, name string) (target string, uid int, isLink bool, err error) {
	lfd, err := syscall.Openat(dirfd, name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "", 0, false, err
	}
	defer syscall.Close(lfd)
	var st syscall.Stat_t
	if err := syscall.Fstat(lfd, &st); err != nil {
		return "", 0, false, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return "", 0, false, nil
	}
	// readlinkat(fd, "") reads the link the O_PATH descriptor names: the
	// very inode whose owner was checked.
	buf := make([]byte, syscall.PathMax)
	empty := [1]byte{}
	n, _, errno := syscall.Syscall6(syscall.SYS_READLINKAT, uintptr(lfd), uintptr(unsafe.Pointer(&empty[0])),
		uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
	if errno != 0 {
		return "", 0, true, errno
	}
	return string(buf[:n]), int(st.Uid), true, nil
}

func procPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// Path is the directory's path as given to OpenDir.
func (d *Dir) Path() string { return d.path }

// Close closes the directory (a Dir handed out by a Dirs cache stays open
// for its next user: the cache closes it).
func (d *Dir) Close() error {
	if d.shared {
		return nil
	}
	return d.closeShared()
}

func (d *Dir) closeShared() error {
	err := d.root.Close()
	if cerr := syscall.Close(d.fd); err == nil {
		err = cerr
	}
	return err
}

// Root is the directory as an os.Root, for walks below it (os.Root never
// leaves it, but follows links inside it). It is closed with d.
func (d *Dir) Root() *os.Root { return d.root }

// Sub opens the directory name in d; a symbolic link there is refused
// (ErrSymlink), never followed.
func (d *Dir) Sub(name string) (*Dir, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fd, err := syscall.Openat(d.fd, name, oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ENOTDIR) {
		if _, _, isLink, _ := readLink(d.fd, name); isLink {
			return nil, fmt.Errorf("%s: %w", d.join(name), ErrSymlink)
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	root, err := os.OpenRoot(procPath(fd))
	if err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return &Dir{fd: fd, root: root, path: d.join(name)}, nil
}

func (d *Dir) join(name string) string { return filepath.Join(d.path, name) }

func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("%q: not a single path element", name)
	}
	return nil
}

// Lstat describes name in d without following a link.
func (d *Dir) Lstat(name string) (fs.FileInfo, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	// fstatat on the directory's descriptor: what d.root.Lstat does for
	// a single path element, without its walk and allocations (a
	// converged file's check calls it once).
	st := &statInfo{name: name}
	err := unix.Fstatat(d.fd, name, (*unix.Stat_t)(unsafe.Pointer(&st.st)), unix.AT_SYMLINK_NOFOLLOW)
	for errors.Is(err, syscall.EINTR) {
		err = unix.Fstatat(d.fd, name, (*unix.Stat_t)(unsafe.Pointer(&st.st)), unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: d.join(name), Err: err}
	}
	return st, nil
}

// unix.Stat_t and syscall.Stat_t are the kernel's struct stat: the
// conversion in Lstat relies on it (this fails to compile otherwise).
var (
	_ = [1]struct{}{}[unsafe.Sizeof(syscall.Stat_t{})-unsafe.Sizeof(unix.Stat_t{})]
	_ = [1]struct{}{}[unsafe.Sizeof(unix.Stat_t{})-unsafe.Sizeof(syscall.Stat_t{})]
)

// statInfo is the fs.FileInfo of a stat_t, as os.Lstat makes it.
type statInfo struct {
	name string
	st   syscall.Stat_t
}

func (s *statInfo) Name() string       { return s.name }
func (s *statInfo) Size() int64        { return s.st.Size }
func (s *statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s *statInfo) IsDir() bool        { return s.Mode().IsDir() }
func (s *statInfo) Sys() any           { return &s.st }
func (s *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if s.st.Mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// Open opens name in d with flag (O_RDONLY, O_RDWR...; O_NOFOLLOW,
// O_NONBLOCK and O_CLOEXEC are added: a FIFO does not block). A symbolic
// link is ErrSymlink. When checked is not nil the file must be that very
// inode (same device and inode number), else ErrChanged. A file the
// process may not read is opened O_PATH (for Fchown through /proc), as
// reported by the returned pathOnly.
func (d *Dir) Open(name string, flag int, checked fs.FileInfo) (f *os.File, pathOnly bool, err error) {
	if err := checkName(name); err != nil {
		return nil, false, err
	}
	fd, err := syscall.Openat(d.fd, name, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.EACCES) && flag&(syscall.O_WRONLY|syscall.O_RDWR) == 0 {
		fd, err = syscall.Openat(d.fd, name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		pathOnly = true
	}
	if errors.Is(err, syscall.ELOOP) {
		dest, _ := d.root.Readlink(name)
		return nil, false, fmt.Errorf("%s is a symlink to %s: %w", d.join(name), dest, ErrSymlink)
	}
	if err != nil {
		return nil, false, &fs.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	f = os.NewFile(uintptr(fd), d.join(name))
	if checked != nil {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			f.Close()
			return nil, false, &fs.PathError{Op: "fstat", Path: d.join(name), Err: err}
		}
		if want, ok := checked.Sys().(*syscall.Stat_t); ok && (want.Dev != st.Dev || want.Ino != st.Ino || st.Mode&syscall.S_IFMT == syscall.S_IFLNK) {
			f.Close()
			return nil, false, fmt.Errorf("%s: %w", d.join(name), ErrChanged)
		}
	}
	return f, pathOnly, nil
}

// Mkdir creates the directory name in d with perm (less the umask).
func (d *Dir) Mkdir(name string, perm fs.FileMode) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := syscall.Mkdirat(d.fd, name, uint32(perm.Perm())); err != nil {
		return &fs.PathError{Op: "mkdir", Path: d.join(name), Err: err}
	}
	return nil
}

// Remove removes the file, link or empty directory name in d (a link, not
// its target).
func (d *Dir) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := d.root.Remove(name); err != nil {
		return &fs.PathError{Op: "remove", Path: d.join(name), Err: unwrapPath(err)}
	}
	return nil
}

// RemoveAll removes name in d and everything below it, following no link.
func (d *Dir) RemoveAll(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := d.root.RemoveAll(name); err != nil {
		return &fs.PathError{Op: "remove", Path: d.join(name), Err: unwrapPath(err)}
	}
	return nil
}

// Readlink returns the target of the link name in d.
func (d *Dir) Readlink(name string) (string, error) { return d.root.Readlink(name) }

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ReadFile reads the regular file name in d, at most limit bytes, without
// following it when it is a symbolic link (ErrSymlink) and, when checked
// is not nil, only if it is still that very inode (ErrChanged), as Open
// does; a file the process may not read is fs.ErrPermission. It works on
// a bare descriptor (no *os.File, nothing registered with the runtime's
// poller) and sizes its buffer by checked's size: a check's read of an
// unchanged file costs open, fstat, two reads and close.
func (d *Dir) ReadFile(name string, checked fs.FileInfo, limit int64) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fd, err := syscall.Openat(d.fd, name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	for errors.Is(err, syscall.EINTR) {
		fd, err = syscall.Openat(d.fd, name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	}
	if errors.Is(err, syscall.ELOOP) {
		dest, _ := d.root.Readlink(name)
		return nil, fmt.Errorf("%s is a symlink to %s: %w", d.join(name), dest, ErrSymlink)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	defer syscall.Close(fd)
	size := int64(0)
	if checked != nil {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return nil, &fs.PathError{Op: "fstat", Path: d.join(name), Err: err}
		}
		if want, ok := checked.Sys().(*syscall.Stat_t); ok && (want.Dev != st.Dev || want.Ino != st.Ino) {
			return nil, fmt.Errorf("%s: %w", d.join(name), ErrChanged)
		}
		size = st.Size
	}
	buf := make([]byte, 0, min(max(size, 0)+1, limit))
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):min(int64(cap(buf)), limit)])
		if errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.EAGAIN) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: d.join(name), Err: err}
		}
		if n <= 0 {
			break
		}
		buf = buf[:len(buf)+n]
		if size > 0 && int64(len(buf)) == size && len(buf) < cap(buf) {
			// All fstat's size, from a read asked for one byte more: a
			// regular file's read is short only at its end (no second
			// read to see the end; a file grown since reads on).
			break
		}
	}
	return buf, nil
}

package file

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/manifold-run/manifold/resources/ids"
)

// permBits are the mode bits the mode property manages.
const permBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// meta is the mode and ownership of a path; uid and gid -1 mean unmanaged
// (in a desired meta) and modeSet false an unmanaged mode.
type meta struct {
	mode     os.FileMode
	modeSet  bool
	uid, gid int
}

// wantMeta resolves the desired mode, owner and group (names through the
// system's user and group databases).
func (f *File) wantMeta() (meta, error) {
	m := meta{uid: -1, gid: -1}
	var err error
	if m.mode, m.modeSet, err = parseMode(f.Mode); err != nil {
		return meta{}, err
	}
	if f.Owner != "" {
		if m.uid, err = ids.UID(string(f.Owner)); err != nil {
			return meta{}, err
		}
	}
	if f.Group != "" {
		if m.gid, err = ids.GID(string(f.Group)); err != nil {
			return meta{}, err
		}
	}
	return m, nil
}

func metaOf(fi fs.FileInfo) meta {
	m := meta{mode: fi.Mode() & permBits, modeSet: true, uid: -1, gid: -1}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		m.uid, m.gid = int(st.Uid), int(st.Gid)
	}
	return m
}

// perm returns the desired mode, or def when the mode is unmanaged.
func (m meta) perm(def os.FileMode) os.FileMode {
	if m.modeSet {
		return m.mode
	}
	return def
}

// differences lists how have differs from the desired m.
// "set ..." reads the same as a check ("would set ...") and as a change.
func (m meta) differences(have meta) []string {
	var out []string
	if m.modeSet && m.mode != have.mode {
		out = append(out, fmt.Sprintf("set mode %s → %s", modeString(have.mode), modeString(m.mode)))
	}
	if m.uid >= 0 && m.uid != have.uid {
		out = append(out, fmt.Sprintf("set owner %d → %d", have.uid, m.uid))
	}
	if m.gid >= 0 && m.gid != have.gid {
		out = append(out, fmt.Sprintf("set group %d → %d", have.gid, m.gid))
	}
	return out
}

// applyTo changes the ownership, then the mode (chown may clear the setuid
// and setgid bits), of the file or directory checked as checked, where they
// differ from have. It works on a descriptor opened without following a
// final symbolic link and refuses a path whose inode is no longer the one
// checked (ErrChanged), so a link planted between check and apply is never
// followed.
func (m meta) applyTo(path string, checked fs.FileInfo, have meta) error {
	uid, gid := -1, -1
	if m.uid >= 0 && m.uid != have.uid {
		uid = m.uid
	}
	if m.gid >= 0 && m.gid != have.gid {
		gid = m.gid
	}
	chmod := m.modeSet && (m.mode != have.mode || uid >= 0 || gid >= 0)
	if uid < 0 && gid < 0 && !chmod {
		return nil
	}
	h, err := openNoFollow(path, checked)
	if err != nil {
		return err
	}
	defer h.Close()
	if uid >= 0 || gid >= 0 {
		if err := h.chown(uid, gid); err != nil {
			return err
		}
	}
	if chmod {
		return h.chmod(m.mode)
	}
	return nil
}

// tempInfix follows the target's name in the temporary files of
// writeAtomic: ".NAME.manifold-<slot>".
const tempInfix = ".manifold-"

// tempSlots is how many temporary files of one target can exist at once:
// writers of the same file at the same moment take the next free slot.
// Slots keep a write O(1) in the size of the directory: the leftovers of
// a killed writer are found by name, not by listing the directory.
const tempSlots = 8

// staleTempAge is how old an unlocked temporary file must be before it is
// removed as a dead writer's: a writer creates the file, then locks it.
const staleTempAge = 5 * time.Second

// writeAtomic replaces path with data: a temporary file in the same
// directory is written, given mode and ownership (uid, gid -1: the
// worker's), fsynced and renamed over path; the directory is then fsynced.
// The temporary file is flock(2)ed until renamed, so temporary files of
// path that a killed writer left are told apart and removed first.
func writeAtomic(path string, data []byte, mode os.FileMode, uid, gid int) (err error) {
	dir := filepath.Dir(path)
	tmp, err := createTemp(dir, filepath.Base(path))
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if uid >= 0 && uid == os.Getuid() {
		uid = -1
	}
	if gid >= 0 && gid == os.Getgid() {
		gid = -1
	}
	if uid >= 0 || gid >= 0 {
		if err = tmp.Chown(uid, gid); err != nil {
			return err
		}
	}
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	// Renamed while still locked, then closed.
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	renamed = true
	if err = tmp.Close(); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync() // best effort: the rename is done either way
		d.Close()
	}
	return nil
}

// tempPath is slot k of the temporary files of dir/base.
func tempPath(dir, base string, k int) string {
	return filepath.Join(dir, "."+base+tempInfix+strconv.Itoa(k))
}

// createTemp removes the temporary files of dir/base that a killed writer
// left, then creates a temporary file in the first free slot and locks it
// (flock, held until the file is closed). With every slot taken by live
// writers it falls back to a random name.
func createTemp(dir, base string) (*os.File, error) {
	for k := range tempSlots {
		removeIfStale(tempPath(dir, base, k))
	}
	for k := range tempSlots {
		f, err := os.OpenFile(tempPath(dir, base, k), os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return lockTemp(f)
	}
	f, err := os.CreateTemp(dir, "."+base+tempInfix+"x*")
	if err != nil {
		return nil, err
	}
	return lockTemp(f)
}

func lockTemp(f *os.File) (*os.File, error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// removeIfStale removes p when it is a temporary file a killed writer
// left: a regular file, unlocked and older than staleTempAge. Best effort:
// a file it cannot judge is left.
func removeIfStale(p string) {
	info, err := os.Lstat(p)
	if err != nil || !info.Mode().IsRegular() || time.Since(info.ModTime()) < staleTempAge {
		return
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		_ = os.Remove(p)
	}
}

// unixToFileMode turns unix mode bits (0o4755) into an os.FileMode, whose
// setuid, setgid and sticky bits live elsewhere.
func unixToFileMode(n uint32) os.FileMode {
	m := os.FileMode(n & 0o777)
	if n&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if n&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if n&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// modeString renders a mode as CCM writes it: "0644", "4755".
func modeString(m os.FileMode) string {
	n := uint32(m & fs.ModePerm)
	if m&fs.ModeSetuid != 0 {
		n |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		n |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		n |= 0o1000
	}
	return fmt.Sprintf("%04o", n)
}

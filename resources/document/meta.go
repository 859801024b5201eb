package document

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/manifold-run/manifold/resources/ids"
)

// meta is the mode and ownership a document file should have; modeSet
// false and uid, gid -1 mean unmanaged.
type meta struct {
	mode     fs.FileMode
	modeSet  bool
	uid, gid int
}

func parseMode(s string) (fs.FileMode, bool, error) {
	if s == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0o"), 8, 32)
	if err != nil || n > 0o777 {
		return 0, false, fmt.Errorf("mode %q: want an octal permission such as \"0644\"", s)
	}
	return fs.FileMode(n), true, nil
}

// wantMeta resolves the mode, owner and group properties.
func (p *Properties) wantMeta() (meta, error) {
	m := meta{uid: -1, gid: -1}
	var err error
	if m.mode, m.modeSet, err = parseMode(p.Mode); err != nil {
		return meta{}, err
	}
	if p.Owner != "" {
		if m.uid, err = ids.UID(p.Owner); err != nil {
			return meta{}, err
		}
	}
	if p.Group != "" {
		if m.gid, err = ids.GID(p.Group); err != nil {
			return meta{}, err
		}
	}
	return m, nil
}

func metaOf(fi fs.FileInfo) meta {
	m := meta{mode: fi.Mode().Perm(), modeSet: true, uid: -1, gid: -1}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		m.uid, m.gid = int(st.Uid), int(st.Gid)
	}
	return m
}

// differences lists how have differs from the wanted m, worded so that
// "would ..." reads right.
func (m meta) differences(have meta) []string {
	var out []string
	if m.modeSet && m.mode != have.mode {
		out = append(out, fmt.Sprintf("set mode %04o → %04o", uint32(have.mode), uint32(m.mode)))
	}
	if m.uid >= 0 && m.uid != have.uid {
		out = append(out, fmt.Sprintf("set owner %d → %d", have.uid, m.uid))
	}
	if m.gid >= 0 && m.gid != have.gid {
		out = append(out, fmt.Sprintf("set group %d → %d", have.gid, m.gid))
	}
	return out
}

// over returns m with unmanaged parts taken from have.
func (m meta) over(have meta) meta {
	if !m.modeSet {
		m.mode, m.modeSet = have.mode, have.modeSet
	}
	if m.uid < 0 {
		m.uid = have.uid
	}
	if m.gid < 0 {
		m.gid = have.gid
	}
	return m
}

// applyTo sets ownership, then mode (chown may clear mode bits).
func (m meta) applyTo(path string, have meta) error {
	uid, gid := -1, -1
	if m.uid >= 0 && m.uid != have.uid {
		uid = m.uid
	}
	if m.gid >= 0 && m.gid != have.gid {
		gid = m.gid
	}
	if uid >= 0 || gid >= 0 {
		if err := os.Lchown(path, uid, gid); err != nil {
			return err
		}
	}
	if m.modeSet && (m.mode != have.mode || uid >= 0 || gid >= 0) {
		return os.Chmod(path, m.mode)
	}
	return nil
}

// writeAtomic replaces path with data through a temporary file in the same
// directory (given mode and, unless -1, ownership), fsynced and renamed over
// path. The temporary file is removed when anything fails.
func writeAtomic(path string, data []byte, mode fs.FileMode, uid, gid int) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".manifold-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if uid == os.Getuid() {
		uid = -1
	}
	if gid == os.Getgid() {
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
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync() // best effort: the rename is done either way
		d.Close()
	}
	return nil
}

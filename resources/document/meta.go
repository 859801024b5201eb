package document

import (
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/manifold-run/manifold/resources/ids"
	"github.com/manifold-run/manifold/resources/safefs"
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

// applyTo sets ownership, then mode (chown may clear mode bits), of name
// in dir through a descriptor that must be the inode checked (never a
// link; safefs.ErrChanged otherwise).
func (m meta) applyTo(dir *safefs.Dir, name string, checked fs.FileInfo, have meta) error {
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
	f, pathOnly, err := dir.Open(name, syscall.O_RDONLY, checked)
	if err != nil {
		return err
	}
	defer f.Close()
	// An O_PATH descriptor (a file the worker may not read) is changed
	// through /proc/self/fd, which names that very inode.
	proc := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if uid >= 0 || gid >= 0 {
		if pathOnly {
			err = os.Chown(proc, uid, gid)
		} else {
			err = f.Chown(uid, gid)
		}
		if err != nil {
			return err
		}
	}
	if !chmod {
		return nil
	}
	if pathOnly {
		return os.Chmod(proc, m.mode)
	}
	return f.Chmod(m.mode)
}

// writeAtomic replaces path with data (safefs.WriteFile: a temporary file
// beside it, given mode and, unless -1, ownership, fsynced and renamed
// over path; its parent opened without following untrusted links).
func writeAtomic(path string, data []byte, mode fs.FileMode, uid, gid int) error {
	return safefs.WriteFile(path, data, mode, uid, gid)
}

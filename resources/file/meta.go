package file

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/ids"
	"github.com/manifold-run/manifold/resources/safefs"
)

// permBits are the mode bits the mode property manages.
const permBits = fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky

// meta is the mode and ownership of a path; uid and gid -1 mean unmanaged
// (in a desired meta) and modeSet false an unmanaged mode.
type meta struct {
	mode     os.FileMode
	modeSet  bool
	uid, gid int
	// assumedOwner and assumedGroup name, in noop, an owner or group the
	// host does not have yet and the run would create (uid, gid -1).
	assumedOwner, assumedGroup string
}

// wantMeta resolves the desired mode, owner and group (names through the
// system's user and group databases).
func (f *File) wantMeta() (meta, error) { return f.wantMetaIn(context.Background(), nil) }

// wantMetaIn is wantMeta in env: in noop, an owner or group the host does
// not have but the run would create (env.Assumed) is not an error. Names
// resolve under ctx's ids.Snapshot, if any.
func (f *File) wantMetaIn(ctx context.Context, env *resources.Env) (meta, error) {
	m := meta{uid: -1, gid: -1}
	var err error
	if m.mode, m.modeSet, err = parseMode(f.Mode); err != nil {
		return meta{}, err
	}
	if f.Owner != "" {
		if m.uid, err = ids.UIDIn(ctx, string(f.Owner)); err != nil {
			if !env.Assumed().User(string(f.Owner)) {
				return meta{}, err
			}
			m.uid, m.assumedOwner = -1, string(f.Owner)
		}
	}
	if f.Group != "" {
		if m.gid, err = ids.GIDIn(ctx, string(f.Group)); err != nil {
			if !env.Assumed().Group(string(f.Group)) {
				return meta{}, err
			}
			m.gid, m.assumedGroup = -1, string(f.Group)
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
	if m.assumedOwner != "" {
		out = append(out, fmt.Sprintf("set owner %d → %s (a user this run creates)", have.uid, m.assumedOwner))
	}
	if m.assumedGroup != "" {
		out = append(out, fmt.Sprintf("set group %d → %s (a group this run creates)", have.gid, m.assumedGroup))
	}
	return out
}

// applyTo is applyIn on path, its parent opened as writes open it.
func (m meta) applyTo(path string, checked fs.FileInfo, have meta) error {
	d, name, err := safefs.OpenParent(path)
	if err != nil {
		return err
	}
	defer d.Close()
	return m.applyIn(d, name, checked, have)
}

// applyIn changes the ownership, then the mode (chown may clear the setuid
// and setgid bits), of the file or directory name in d checked as checked,
// where they differ from have. It works on a descriptor opened without
// following a final symbolic link and refuses a path whose inode is no
// longer the one checked (ErrChanged), so a link planted between check and
// apply is never followed.
func (m meta) applyIn(d *safefs.Dir, name string, checked fs.FileInfo, have meta) error {
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
	h, err := openIn(d, name, checked)
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

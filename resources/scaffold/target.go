package scaffold

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/safefs"
)

// target is the directory a scaffold renders into.
type target struct {
	dir string
	lim limits
}

// plan is what a check found: files to write and files to purge, as
// slash-separated paths relative to the target.
type plan struct {
	add, update, purge []string
}

func (p plan) empty() bool { return len(p.add)+len(p.update)+len(p.purge) == 0 }

// message names the files apply writes and removes.
func (p plan) message() string {
	var parts []string
	if w := append(append([]string(nil), p.add...), p.update...); len(w) > 0 {
		sort.Strings(w)
		parts = append(parts, fmt.Sprintf("write %d %s (%s)", len(w), plural(len(w)), names(w)))
	}
	if len(p.purge) > 0 {
		parts = append(parts, fmt.Sprintf("remove %d %s (%s)", len(p.purge), plural(len(p.purge)), names(p.purge)))
	}
	return strings.Join(parts, ", ")
}

// diff lists every file: "+ new", "~ changed", "- purged".
func (p plan) diff() string {
	var b strings.Builder
	for _, l := range []struct {
		mark  string
		paths []string
	}{{"+", p.add}, {"~", p.update}, {"-", p.purge}} {
		for _, f := range l.paths {
			fmt.Fprintf(&b, "%s %s\n", l.mark, f)
		}
	}
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return "file"
	}
	return "files"
}

func names(paths []string) string {
	if len(paths) <= listed {
		return strings.Join(paths, ", ")
	}
	return strings.Join(paths[:listed], ", ") + fmt.Sprintf(" and %d more", len(paths)-listed)
}

// open opens the target directory by descriptor (safefs: no symbolic
// link owned by another user on the way, none at the target itself); it
// returns nil when the target (or a directory above it) does not exist.
func (t target) open() (*safefs.Dir, error) {
	parent, err := safefs.OpenDir(filepath.Dir(t.dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	return t.sub(parent)
}

// sub opens the target in its parent directory.
func (t target) sub(parent *safefs.Dir) (*safefs.Dir, error) {
	d, err := parent.Sub(filepath.Base(t.dir))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, safefs.ErrSymlink):
		return nil, fmt.Errorf("%w: %s is a symbolic link", ErrSymlink, t.dir)
	case errors.Is(err, syscall.ENOTDIR):
		fi, _ := parent.Lstat(filepath.Base(t.dir))
		what := "not a directory"
		if fi != nil {
			what = fi.Mode().Type().String()
		}
		return nil, fmt.Errorf("%s exists and is not a directory (%s)", t.dir, what)
	}
	return d, err
}

// root is the target as an os.Root (nil when it does not exist) and its
// release.
func (t target) root() (*os.Root, func(), error) {
	d, err := t.open()
	if err != nil || d == nil {
		return nil, func() {}, err
	}
	return d.Root(), func() { d.Close() }, nil
}

// state tells what is at p under the target: missing, a regular file
// with the given content equal or not to want, or something to replace
// (a symbolic link). Directories on the way must be real directories.
func state(root *os.Root, dir, p string, want []byte) (missing, equal bool, err error) {
	if root == nil {
		return true, false, nil
	}
	parts := strings.Split(p, "/")
	for i := range len(parts) - 1 {
		d := strings.Join(parts[:i+1], "/")
		fi, err := root.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			return true, false, nil
		}
		if err != nil {
			return false, false, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return false, false, fmt.Errorf("%w: %s is a symbolic link", ErrSymlink, filepath.Join(dir, d))
		}
		if !fi.IsDir() {
			return false, false, fmt.Errorf("%s exists and is not a directory (%s)", filepath.Join(dir, d), fi.Mode().Type())
		}
	}
	fi, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return true, false, nil
	}
	if err != nil {
		return false, false, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return false, false, nil // replaced by the file, never followed
	case fi.IsDir():
		return false, false, fmt.Errorf("%s exists and is a directory, the template renders a file", filepath.Join(dir, p))
	case !fi.Mode().IsRegular():
		return false, false, fmt.Errorf("%s exists and is not a regular file (%s)", filepath.Join(dir, p), fi.Mode().Type())
	case fi.Size() != int64(len(want)):
		return false, false, nil
	}
	f, err := root.Open(p)
	if err != nil {
		return false, false, err
	}
	defer f.Close()
	have, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return false, false, err
	}
	return false, bytes.Equal(have, want), nil
}

// plan compares the rendered files with the target.
func (t target) plan(out map[string][]byte, purge bool) (plan, error) {
	var pl plan
	root, release, err := t.root()
	if err != nil {
		return pl, err
	}
	defer release()
	for _, p := range sortedKeys(out) {
		missing, equal, err := state(root, t.dir, p, out[p])
		switch {
		case err != nil:
			return pl, err
		case missing:
			pl.add = append(pl.add, p)
		case !equal:
			pl.update = append(pl.update, p)
		}
	}
	if purge && root != nil {
		if pl.purge, err = extra(root, out, t.lim.targetEntries); err != nil {
			return pl, err
		}
	}
	return pl, nil
}

// extra lists what lies under the target that is not in out: files and
// symbolic links (never followed), not directories.
func extra(root *os.Root, out map[string][]byte, max int) ([]string, error) {
	var found []string
	n := 0
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if n++; n > max {
			return fmt.Errorf("%w: more than %d entries under the target", ErrTooLarge, max)
		}
		if d.IsDir() {
			return nil
		}
		if _, ok := out[p]; !ok {
			found = append(found, p)
		}
		return nil
	})
	return found, err
}

// apply writes the planned files, running post after each, then purges.
func (t target) apply(pl plan, out map[string][]byte, post func(path string) error) error {
	parent, err := safefs.MkdirAll(filepath.Dir(t.dir), 0o755)
	if err != nil {
		return err
	}
	defer parent.Close()
	if err := parent.Mkdir(filepath.Base(t.dir), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	d, err := t.sub(parent)
	if err != nil {
		return err
	}
	if d == nil {
		return fmt.Errorf("%s: %w", t.dir, fs.ErrNotExist)
	}
	defer d.Close()
	root := d.Root()
	writes := append(append([]string(nil), pl.add...), pl.update...)
	sort.Strings(writes)
	for _, p := range writes {
		if err := writeFile(root, p, out[p]); err != nil {
			return fmt.Errorf("write %s: %w", filepath.Join(t.dir, p), err)
		}
		if err := post(filepath.Join(t.dir, filepath.FromSlash(p))); err != nil {
			return err
		}
	}
	for _, p := range pl.purge {
		if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("purge %s: %w", filepath.Join(t.dir, p), err)
		}
	}
	return nil
}

// writeFile writes b to p under root through a temporary file renamed
// into place. An existing regular file keeps its permissions; new files
// get 0644. The rename replaces a symbolic link at p, never its target.
func writeFile(root *os.Root, p string, b []byte) (err error) {
	if dir := path.Dir(p); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	mode := fs.FileMode(0o644)
	if fi, err := root.Lstat(p); err == nil && fi.Mode().IsRegular() {
		mode = fi.Mode().Perm()
	}
	tmp := path.Join(path.Dir(p), "."+path.Base(p)+".manifold-tmp")
	_ = root.Remove(tmp)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			_ = root.Remove(tmp)
		}
	}()
	if _, err = f.Write(b); err != nil {
		return err
	}
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return root.Rename(tmp, p)
}

// absent removes the files the templates produce (regular files and
// symbolic links where they go), then the directories left empty, then
// the target when it is empty.
func (t target) absent(out map[string][]byte, apply bool) (resources.Result, error) {
	root, release, err := t.root()
	if err != nil || root == nil {
		return resources.Result{}, err
	}
	defer release()
	var present []string
	for _, p := range sortedKeys(out) {
		missing, _, err := state(root, t.dir, p, out[p])
		if err != nil {
			return resources.Result{}, err
		}
		if !missing {
			present = append(present, p)
		}
	}
	if len(present) == 0 {
		return resources.Result{}, nil
	}
	res := resources.Result{Changed: true,
		Message: fmt.Sprintf("remove %d %s (%s)", len(present), plural(len(present)), names(present)),
		Diff:    plan{purge: present}.diff()}
	if !apply {
		return res, nil
	}
	dirs := map[string]bool{}
	for _, p := range present {
		if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return resources.Result{}, fmt.Errorf("remove %s: %w", filepath.Join(t.dir, p), err)
		}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	// Deepest first; a directory that is not empty stays.
	ds := sortedKeys(dirs)
	sort.Slice(ds, func(i, j int) bool { return strings.Count(ds[i], "/") > strings.Count(ds[j], "/") })
	for _, d := range ds {
		_ = root.Remove(d)
	}
	if parent, err := safefs.OpenDir(filepath.Dir(t.dir)); err == nil {
		_ = parent.Remove(filepath.Base(t.dir)) // only when empty
		parent.Close()
	}
	return res, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

package archive

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/manifold-run/manifold/resources/safefs"
)

// maxLinkHops bounds how many symbolic links resolving one link may follow.
const maxLinkHops = 40

// limits bound one extraction.
type limits struct {
	download int64 // bytes of the archive file
	extract  int64 // bytes of all regular files extracted
	entries  int   // entries of the archive
}

// extractor writes the entries of one archive into a private temporary
// directory through an os.Root, so no entry, whatever its name or the links
// before it, can write outside it.
type extractor struct {
	ctx     context.Context
	root    *os.Root
	lim     limits
	written int64
	count   int
	dirs    map[string]fs.FileMode
}

// extractInfix follows extract_parent's name in the temporary trees of its
// extractions: ".NAME.manifold-extract-<random>", beside it.
const extractInfix = ".manifold-extract-"

func extractPrefix(name string) string { return "." + name + extractInfix }

// openDest opens the directory holding dest by descriptor (safefs: links
// on the way are followed only when root or the worker owns them), creating
// it when create is set, and checks dest itself is a directory or missing,
// never a symbolic link (ErrLinkedParent). Without create a missing parent
// is (nil, "", nil).
func openDest(dest string, create bool) (*safefs.Dir, string, error) {
	var (
		parent *safefs.Dir
		err    error
	)
	if create {
		parent, err = safefs.MkdirAll(filepath.Dir(dest), 0o755)
	} else {
		parent, err = safefs.OpenDir(filepath.Dir(dest))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", nil
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("extract_parent: %w", err)
	}
	name := filepath.Base(dest)
	fi, err := parent.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		parent.Close()
		return nil, "", fmt.Errorf("extract_parent: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := parent.Readlink(name)
		parent.Close()
		return nil, "", fmt.Errorf("extract_parent %s is a symlink to %s: %w", dest, target, ErrLinkedParent)
	case !fi.IsDir():
		parent.Close()
		return nil, "", fmt.Errorf("extract_parent %s exists and is not a directory (%s)", dest, fi.Mode().Type())
	}
	return parent, name, nil
}

// leftovers lists the temporary trees of extractions into name (in parent)
// that no live extraction holds: what a killed worker left. An extraction
// holds an flock on its tree's directory until the tree is in place.
func leftovers(parent *safefs.Dir, name string) ([]string, error) {
	f, err := parent.Root().Open(".")
	if err != nil {
		return nil, err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if !strings.HasPrefix(n, extractPrefix(name)) {
			continue
		}
		d, _, err := parent.Open(n, syscall.O_RDONLY|syscall.O_DIRECTORY, nil)
		if err != nil {
			continue // not a directory, or gone: not ours to judge
		}
		if syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			out = append(out, n)
		}
		d.Close()
	}
	slices.Sort(out)
	return out, nil
}

// extract unpacks the archive src (kind: tar, tar.gz or zip) into dest:
// first completely into a temporary directory beside dest
// (".NAME.manifold-extract-<random>", flocked while it exists), checked for
// escaping links and given owner and group (uid, gid; -1 keeps the
// worker's), then moved into place by descriptor (see install). The trees
// a killed extraction left are removed first. On any error the temporary
// directory is removed; dest may then hold part of a merge only when
// moving the checked tree into it failed midway.
func extract(ctx context.Context, src *os.File, k kind, dest string, lim limits, uid, gid int) (err error) {
	parent, name, err := openDest(dest, true)
	if err != nil {
		return err
	}
	defer parent.Close()
	old, err := leftovers(parent, name)
	if err != nil {
		return err
	}
	for _, n := range old {
		if err := parent.RemoveAll(n); err != nil {
			return fmt.Errorf("removing the leftover of an interrupted extraction: %w", err)
		}
	}
	tmpName := extractPrefix(name) + strconv.FormatUint(rand.Uint64(), 36)
	if err := parent.Mkdir(tmpName, 0o700); err != nil {
		return err
	}
	lock, _, err := parent.Open(tmpName, syscall.O_RDONLY|syscall.O_DIRECTORY, nil)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer func() {
		if rerr := parent.RemoveAll(tmpName); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = rerr
		}
	}()
	tmp, err := parent.Sub(tmpName)
	if err != nil {
		return err
	}
	defer tmp.Close()
	x := &extractor{ctx: ctx, root: tmp.Root(), lim: lim, dirs: map[string]fs.FileMode{}}
	switch k {
	case kindZip:
		err = x.zip(src)
	default:
		err = x.tar(src, k == kindTarGz)
	}
	if err != nil {
		return err
	}
	if err := x.finish(uid, gid); err != nil {
		return err
	}
	return install(parent, tmpName, name)
}

func (x *extractor) tar(f *os.File, gz bool) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	var r io.Reader = f
	if gz {
		z, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		defer z.Close()
		r = z
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tar: %w", err)
		}
		var typ entryType
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeRegA:
			typ = typeFile
		case tar.TypeDir:
			typ = typeDir
		case tar.TypeSymlink:
			typ = typeSymlink
		case tar.TypeLink:
			typ = typeHardlink
		case tar.TypeXGlobalHeader:
			continue
		default:
			return fmt.Errorf("%s: %w (tar type %q)", h.Name, ErrUnsupportedEntry, h.Typeflag)
		}
		if err := x.entry(h.Name, typ, fs.FileMode(h.Mode)&fs.ModePerm, h.Linkname, tr); err != nil {
			return err
		}
	}
}

func (x *extractor) zip(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	zr, err := zip.NewReader(f, fi.Size())
	if err != nil {
		return fmt.Errorf("zip: %w", err)
	}
	for _, zf := range zr.File {
		mode := zf.Mode()
		typ := typeFile
		var target string
		switch {
		case mode.IsDir() || strings.HasSuffix(zf.Name, "/"):
			typ = typeDir
		case mode&fs.ModeSymlink != 0:
			typ = typeSymlink
			if zf.UncompressedSize64 > 4096 {
				return fmt.Errorf("%s: %w (symlink target of %d bytes)", zf.Name, ErrUnsupportedEntry, zf.UncompressedSize64)
			}
			b, err := readZip(zf)
			if err != nil {
				return err
			}
			target = string(b)
		case !mode.IsRegular():
			return fmt.Errorf("%s: %w (%s)", zf.Name, ErrUnsupportedEntry, mode.Type())
		}
		var r io.Reader = strings.NewReader("")
		if typ == typeFile {
			rc, err := zf.Open()
			if err != nil {
				return fmt.Errorf("zip %s: %w", zf.Name, err)
			}
			r = rc
			defer rc.Close()
		}
		perm := mode & fs.ModePerm
		if perm == 0 && typ == typeFile {
			perm = 0o644
		}
		if err := x.entry(zf.Name, typ, perm, target, r); err != nil {
			return err
		}
	}
	return nil
}

func readZip(zf *zip.File) ([]byte, error) {
	rc, err := zf.Open()
	if err != nil {
		return nil, fmt.Errorf("zip %s: %w", zf.Name, err)
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, 4096))
}

type entryType int

const (
	typeFile entryType = iota
	typeDir
	typeSymlink
	typeHardlink
)

// entryPath cleans an entry name into a local slash path, or fails with
// ErrEscape.
func entryPath(name string) (string, error) {
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) {
		return "", fmt.Errorf("%s: %w (absolute path)", name, ErrEscape)
	}
	p := path.Clean(name)
	if p == "." {
		return p, nil
	}
	if !filepath.IsLocal(p) {
		return "", fmt.Errorf("%s: %w", name, ErrEscape)
	}
	return p, nil
}

// entry writes one entry. mode is the permission bits (setuid, setgid and
// sticky are dropped).
func (x *extractor) entry(name string, typ entryType, mode fs.FileMode, link string, r io.Reader) error {
	if err := x.ctx.Err(); err != nil {
		return context.Cause(x.ctx)
	}
	x.count++
	if x.count > x.lim.entries {
		return fmt.Errorf("%w: more than %d entries", ErrTooLarge, x.lim.entries)
	}
	p, err := entryPath(name)
	if err != nil {
		return err
	}
	if p == "." {
		if typ == typeDir {
			x.dirs[p] = mode
			return nil
		}
		return fmt.Errorf("%q: %w", name, ErrUnsupportedEntry)
	}
	if dir := path.Dir(p); dir != "." {
		if err := x.root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	switch typ {
	case typeDir:
		if err := x.root.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		x.dirs[p] = mode
		return nil
	case typeSymlink:
		if link == "" || path.IsAbs(link) || filepath.IsAbs(link) {
			return fmt.Errorf("%s -> %s: %w (absolute link)", name, link, ErrEscape)
		}
		if !filepath.IsLocal(path.Join(path.Dir(p), link)) {
			return fmt.Errorf("%s -> %s: %w", name, link, ErrEscape)
		}
		if err := x.root.Symlink(link, p); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	case typeHardlink:
		target, err := entryPath(link)
		if err != nil || target == "." {
			return fmt.Errorf("%s => %s: %w", name, link, ErrEscape)
		}
		if err := x.root.Link(target, p); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	f, err := x.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	left := x.lim.extract - x.written
	n, err := io.Copy(f, io.LimitReader(r, left+1))
	x.written += n
	if err == nil && n > left {
		err = fmt.Errorf("%w: more than %d bytes extracted", ErrTooLarge, x.lim.extract)
	}
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// finish checks every symbolic link resolves inside the tree (a link may be
// harmless alone and escape through another), sets directory modes and, when
// uid or gid is not -1, ownership of everything; all through the tree's
// os.Root, never by path.
func (x *extractor) finish(uid, gid int) error {
	err := fs.WalkDir(x.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if esc, err := escapes(x.root, p); err != nil || esc {
				t, _ := x.root.Readlink(p)
				return fmt.Errorf("%s -> %s: %w", p, t, cmpErr(err, ErrEscape))
			}
		}
		if uid >= 0 || gid >= 0 {
			return x.root.Lchown(p, uid, gid)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Deepest first, so a read-only directory does not block its children.
	dirs := make([]string, 0, len(x.dirs))
	for d := range x.dirs {
		dirs = append(dirs, d)
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		mode := x.dirs[d] | 0o700 // the owner can always enter and update it
		if err := x.root.Chmod(d, mode); err != nil {
			return err
		}
	}
	if _, ok := x.dirs["."]; !ok {
		return x.root.Chmod(".", 0o755)
	}
	return nil
}

func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// escapes reports whether the symbolic link at rel (a slash path inside
// root) resolves outside root, following every link on the way as the
// kernel would; missing components are taken lexically.
func escapes(dir *os.Root, rel string) (bool, error) {
	hops := 0
	parts := strings.Split(path.Dir(rel), "/")
	if path.Dir(rel) == "." {
		parts = nil
	}
	_, esc, err := resolveIn(dir, parts, path.Base(rel), &hops)
	return esc, err
}

// resolveIn walks p from the physical directory stack inside dir.
func resolveIn(dir *os.Root, stack []string, p string, hops *int) ([]string, bool, error) {
	for c := range strings.SplitSeq(p, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return nil, true, nil
			}
			stack = stack[:len(stack)-1]
			continue
		}
		next := append(stack[:len(stack):len(stack)], c)
		full := path.Join(next...)
		fi, err := dir.Lstat(full)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			stack = next
			continue
		}
		if *hops++; *hops > maxLinkHops {
			return nil, false, fmt.Errorf("%w: more than %d links", ErrEscape, maxLinkHops)
		}
		t, err := dir.Readlink(full)
		if err != nil {
			return nil, false, err
		}
		if filepath.IsAbs(t) {
			return nil, true, nil
		}
		var esc bool
		if stack, esc, err = resolveIn(dir, stack, t, hops); err != nil || esc {
			return nil, esc, err
		}
	}
	return stack, false, nil
}

// install moves the extracted tree tmpName into name, both in parent, by
// descriptor: one rename when name does not exist; otherwise entry by
// entry (see merge).
func install(parent *safefs.Dir, tmpName, name string) error {
	if _, err := parent.Lstat(name); errors.Is(err, fs.ErrNotExist) {
		return parent.Rename(tmpName, parent, name)
	}
	src, err := parent.Sub(tmpName)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := parent.Sub(name) // a symlink there now is refused
	if err != nil {
		return err
	}
	defer dst.Close()
	return merge(src, dst)
}

// merge moves the entries of src into dst, merging into existing
// directories and replacing files and links (a link in dst is replaced,
// never followed: every directory is opened by descriptor with
// O_NOFOLLOW). A directory is never replaced by a file, and existing
// directories keep their mode and owner.
func merge(src, dst *safefs.Dir) error {
	f, err := src.Root().Open(".")
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, n := range names {
		sfi, err := src.Lstat(n)
		if err != nil {
			return err
		}
		dfi, err := dst.Lstat(n)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case dfi.IsDir() && sfi.IsDir():
			if err := mergeSub(src, dst, n); err != nil {
				return err
			}
			continue
		case dfi.IsDir():
			return fmt.Errorf("%s is a directory; the archive has a %s there", filepath.Join(dst.Path(), n), sfi.Mode().Type())
		case sfi.IsDir():
			if err := dst.Remove(n); err != nil {
				return err
			}
		}
		if err := src.Rename(n, dst, n); err != nil {
			return err
		}
	}
	return nil
}

func mergeSub(src, dst *safefs.Dir, name string) error {
	s, err := src.Sub(name)
	if err != nil {
		return err
	}
	defer s.Close()
	d, err := dst.Sub(name)
	if err != nil {
		return err
	}
	defer d.Close()
	return merge(s, d)
}

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
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
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
	dir     string
	lim     limits
	written int64
	count   int
	dirs    map[string]fs.FileMode
}

// extract unpacks the archive at file (kind: tar, tar.gz or zip) into dest:
// first completely into a temporary directory beside dest, checked for
// escaping links and given owner and group (uid, gid; -1 keeps the
// worker's), then moved into place (see install). On any error the
// temporary directory is removed and dest is untouched.
func extract(ctx context.Context, file string, k kind, dest string, lim limits, uid, gid int) error {
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".manifold-extract-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return err
	}
	defer root.Close()
	x := &extractor{ctx: ctx, root: root, dir: tmp, lim: lim, dirs: map[string]fs.FileMode{}}
	switch k {
	case kindZip:
		err = x.zip(file)
	default:
		err = x.tar(file, k == kindTarGz)
	}
	if err != nil {
		return err
	}
	if err := x.finish(uid, gid); err != nil {
		return err
	}
	return install(tmp, dest)
}

func (x *extractor) tar(file string, gz bool) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
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

func (x *extractor) zip(file string) error {
	zr, err := zip.OpenReader(file)
	if err != nil {
		return fmt.Errorf("zip: %w", err)
	}
	defer zr.Close()
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
// uid or gid is not -1, ownership of everything.
func (x *extractor) finish(uid, gid int) error {
	err := filepath.WalkDir(x.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(x.dir, p)
		if d.Type()&fs.ModeSymlink != 0 {
			if esc, err := escapes(x.dir, filepath.ToSlash(rel)); err != nil || esc {
				t, _ := os.Readlink(p)
				return fmt.Errorf("%s -> %s: %w", filepath.ToSlash(rel), t, cmpErr(err, ErrEscape))
			}
		}
		if uid >= 0 || gid >= 0 {
			return os.Lchown(p, uid, gid)
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
		if err := os.Chmod(filepath.Join(x.dir, filepath.FromSlash(d)), mode); err != nil {
			return err
		}
	}
	if _, ok := x.dirs["."]; !ok {
		return os.Chmod(x.dir, 0o755)
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
// dir) resolves outside dir, following every link on the way as the kernel
// would; missing components are taken lexically.
func escapes(dir, rel string) (bool, error) {
	hops := 0
	parts := strings.Split(path.Dir(rel), "/")
	if path.Dir(rel) == "." {
		parts = nil
	}
	_, esc, err := resolveIn(dir, parts, path.Base(rel), &hops)
	return esc, err
}

// resolveIn walks p from the physical directory stack inside dir.
func resolveIn(dir string, stack []string, p string, hops *int) ([]string, bool, error) {
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
		full := filepath.Join(dir, filepath.Join(next...))
		fi, err := os.Lstat(full)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			stack = next
			continue
		}
		if *hops++; *hops > maxLinkHops {
			return nil, false, fmt.Errorf("%w: more than %d links", ErrEscape, maxLinkHops)
		}
		t, err := os.Readlink(full)
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

// install moves the extracted tree src into dst: one rename when dst does
// not exist; otherwise entry by entry, merging into existing directories and
// replacing files and links (a link at dst is replaced, never followed).
// A directory is never replaced by a file, and existing directories keep
// their mode and owner.
func install(src, dst string) error {
	fi, err := os.Lstat(dst)
	if errors.Is(err, fs.ErrNotExist) {
		return os.Rename(src, dst)
	}
	if err != nil {
		return err
	}
	sfi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir() && sfi.IsDir():
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := install(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return nil
	case fi.IsDir():
		return fmt.Errorf("%s is a directory; the archive has a %s there", dst, sfi.Mode().Type())
	case sfi.IsDir():
		if err := os.Remove(dst); err != nil {
			return err
		}
	}
	return os.Rename(src, dst)
}

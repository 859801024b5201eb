package safefs

import (
	"io/fs"
	"os"
	"path/filepath"
)

// ReadableByOthers reports whether an unprivileged user of this host (not
// the file's owner, not in its group) could read the file at path: it is
// world-readable (o+r) and every directory from "/" down to it is
// world-searchable (o+x), symbolic links resolved. A path that cannot be
// examined counts as not readable: diffs of it are hidden.
func ReadableByOthers(path string) bool {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	fi, err := os.Stat(real)
	if err != nil || fi.Mode().Perm()&0o004 == 0 {
		return false
	}
	return searchable(filepath.Dir(real))
}

// ReachableByOthers reports whether an unprivileged user could reach the
// entries of directory dir: every directory from "/" down to dir, dir
// included, is world-searchable (o+x), symbolic links resolved. A file
// about to be created in dir with mode m is readable by others when
// ReachableByOthers(dir) and m&0o004 != 0.
func ReachableByOthers(dir string) bool {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	return searchable(real)
}

// searchable checks dir and its ancestors, dir being free of links.
func searchable(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() || fi.Mode()&fs.ModePerm&0o001 == 0 {
			return false
		}
		if d == "/" || d == "." {
			return true
		}
	}
}

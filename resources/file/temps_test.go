package file

import (
	"os"
	"path/filepath"

	"github.com/manifold-run/manifold/resources/safefs"
)

// The temporary files of writeAtomic, as safefs names them.
const (
	tempInfix = safefs.TempInfix
	tempSlots = safefs.TempSlots
)

func tempPath(dir, base string, k int) string { return filepath.Join(dir, safefs.TempName(base, k)) }

func createTemp(dir, base string) (*os.File, error) {
	d, err := safefs.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.CreateTemp(base)
}

// publicDir is a t.TempDir() that other users can reach, as /etc is (the
// test's temporary directories are 0700): diffs of world-readable files in
// it are shown.
func publicDir(t interface {
	TempDir() string
	Fatal(...any)
}) string {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

package tmpdir

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPick(t *testing.T) {
	dir := t.TempDir()
	shm := filepath.Join(dir, "shm")
	if err := os.Mkdir(shm, 0o777); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if got := pick("", shm); got != shm {
		t.Errorf("TMPDIR unset, writable shm: %q, want %q", got, shm)
	}
	t.Setenv("TMPDIR", dir)
	if got := pick(dir, shm); got != dir {
		t.Errorf("TMPDIR=%s: %q, want TMPDIR", dir, got)
	}
	for _, bad := range []string{filepath.Join(dir, "missing"), file} {
		if got := pick("", bad); got != os.TempDir() {
			t.Errorf("shm %s: %q, want os.TempDir() %q", bad, got, os.TempDir())
		}
	}
	if os.Geteuid() != 0 { // root may write anywhere
		if err := os.Chmod(shm, 0o555); err != nil {
			t.Fatal(err)
		}
		if got := pick("", shm); got != os.TempDir() {
			t.Errorf("read-only shm: %q, want os.TempDir()", got)
		}
	}
}

func TestBases(t *testing.T) {
	bases := Bases()
	if bases[0] != Base() {
		t.Fatalf("Bases %v does not start with Base %q", bases, Base())
	}
	if len(bases) == 2 && bases[1] != os.TempDir() || len(bases) > 2 {
		t.Fatalf("Bases %v", bases)
	}
}

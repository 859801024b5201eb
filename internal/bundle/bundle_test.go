package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestResolveWalkThrough is the seed's walk-through of nested apply
// resources (apply-resource-design.txt, "Path Resolution"), with the bundle
// root standing for /opt/ccm/: each level resolves against its own
// manifest's directory, and a level's directory is where its own children
// resolve, whatever its parent's was.
func TestResolveWalkThrough(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		from     string // manifest holding the apply resource (its WD is path.Dir(from))
		ref      string // the apply resource's name
		want     string
		wantWD   string // the child's working directory
		wantFail error
	}{
		{name: "root applies sub", from: "manifest.yaml", ref: "sub/manifest.yaml", want: "sub/manifest.yaml", wantWD: "sub"},
		{name: "sub applies lib relative to sub", from: "sub/manifest.yaml", ref: "lib/manifest.yaml", want: "sub/lib/manifest.yaml", wantWD: "sub/lib"},
		{name: "after lib, sub's WD is still sub", from: "sub/manifest.yaml", ref: "other.yaml", want: "sub/other.yaml", wantWD: "sub"},
		{name: "after sub, the root's WD is still the root", from: "manifest.yaml", ref: "other.yaml", want: "other.yaml", wantWD: "."},
		{name: "absolute resolves against the bundle root", from: "sub/lib/manifest.yaml", ref: "/common/base.yaml", want: "common/base.yaml", wantWD: "common"},
		{name: "absolute root manifest", from: "sub/manifest.yaml", ref: "/manifest.yaml", want: "manifest.yaml", wantWD: "."},
		{name: "dot-dot inside the bundle", from: "sub/lib/manifest.yaml", ref: "../../top.yaml", want: "top.yaml", wantWD: "."},
		{name: "dot segments are cleaned", from: "sub/manifest.yaml", ref: "./lib/../lib/manifest.yaml", want: "sub/lib/manifest.yaml", wantWD: "sub/lib"},
		{name: "escapes from the root", from: "manifest.yaml", ref: "../../etc/x", wantFail: ErrEscapes},
		{name: "escapes from a nested level", from: "sub/lib/manifest.yaml", ref: "../../../etc/x", wantFail: ErrEscapes},
		{name: "absolute cannot climb out", from: "sub/manifest.yaml", ref: "/../etc/x", wantFail: ErrEscapes},
		{name: "just dot-dot", from: "manifest.yaml", ref: "..", wantFail: ErrEscapes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Resolve(tt.from, tt.ref)
			if tt.wantFail != nil {
				if !errors.Is(err, tt.wantFail) {
					t.Fatalf("Resolve(%q, %q) = %q, %v; want %v", tt.from, tt.ref, got, err, tt.wantFail)
				}
				if !strings.Contains(err.Error(), tt.ref) {
					t.Errorf("error %q does not name the path %q", err, tt.ref)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Resolve(%q, %q) = %q, %v; want %q", tt.from, tt.ref, got, err, tt.want)
			}
			if wd := path.Dir(got); wd != tt.wantWD {
				t.Errorf("child WD = %q, want %q", wd, tt.wantWD)
			}
		})
	}
	if _, err := Resolve("manifest.yaml", ""); err == nil {
		t.Error("Resolve of an empty path: want an error")
	}
}

func TestClean(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"a/./b": "a/b", "a/../b": "b", "./m.yaml": "m.yaml"} {
		if got, err := Clean(in); err != nil || got != want {
			t.Errorf("Clean(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/etc/passwd", "..", "../x", "a/../../x"} {
		if got, err := Clean(in); err == nil {
			t.Errorf("Clean(%q) = %q; want an error", in, got)
		}
	}
}

// writeTree writes files (slash paths → content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestArchiveIsDeterministicAndRoundTrips(t *testing.T) {
	t.Parallel()
	files := map[string]string{"manifest.yaml": "resources: []\n", "sub/b.txt": "b", "sub/a.txt": "a", "z/y/x": ""}
	build := func(order []string) []byte {
		b := New()
		for _, n := range order {
			if err := b.Add(n, []byte(files[n])); err != nil {
				t.Fatal(err)
			}
		}
		data, err := b.Archive()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	one := build([]string{"manifest.yaml", "sub/b.txt", "sub/a.txt", "z/y/x"})
	two := build([]string{"z/y/x", "sub/a.txt", "manifest.yaml", "sub/b.txt"})
	if sha256.Sum256(one) != sha256.Sum256(two) {
		t.Fatal("the same files in another order gave another digest")
	}
	b, err := Open(one)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if got, err := b.Read(name); err != nil || string(got) != content {
			t.Errorf("Read(%q) = %q, %v; want %q", name, got, err, content)
		}
	}
	again, err := b.Archive()
	if err != nil || !bytes.Equal(again, one) {
		t.Errorf("re-archiving an opened bundle changed its bytes (err %v)", err)
	}
}

// tarGz builds an archive from raw headers, for what Archive never writes.
func tarGz(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		content := strings.Repeat("x", int(h.Size))
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestOpenRejects(t *testing.T) {
	t.Parallel()
	reg := func(name string, size int64) tar.Header {
		return tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}
	}
	tests := map[string]struct {
		archive []byte
		want    error
	}{
		"symlink":          {tarGz(t, reg("m.yaml", 1), tar.Header{Name: "x", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}), ErrEscapes},
		"hard link":        {tarGz(t, tar.Header{Name: "x", Typeflag: tar.TypeLink, Linkname: "../../etc/passwd"}), ErrEscapes},
		"dot-dot path":     {tarGz(t, reg("../../etc/cron.d/x", 3)), ErrEscapes},
		"nested dot-dot":   {tarGz(t, reg("a/../../x", 3)), ErrEscapes},
		"absolute path":    {tarGz(t, reg("/etc/x", 3)), nil},
		"not a tar.gz":     {[]byte("plain text"), nil},
		"truncated tar.gz": {tarGz(t, reg("m.yaml", 10))[:20], nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, err := Open(tt.archive)
			if err == nil {
				t.Fatalf("Open: want an error, got a bundle of %v", b.Names())
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("Open: %v, want %v", err, tt.want)
			}
		})
	}

	// Directories are skipped, "./" prefixes dropped.
	b, err := Open(tarGz(t, tar.Header{Name: "./sub/", Typeflag: tar.TypeDir, Mode: 0o755}, reg("./sub/m.yaml", 2)))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Names(); !slices.Equal(got, []string{"sub/m.yaml"}) {
		t.Errorf("Names() = %v", got)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	// Files: the third file is one too many; replacing a file is not.
	b := newLimited(2, 100)
	for _, n := range []string{"a", "b", "a"} {
		if err := b.Add(n, []byte("x")); err != nil {
			t.Fatalf("Add(%s): %v", n, err)
		}
	}
	err := b.Add("c", []byte("x"))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 2 files") {
		t.Fatalf("third file: %v, want ErrTooLarge naming the limit", err)
	}

	// Bytes: total size, with replaced content not counted twice.
	b = newLimited(10, 10)
	if err := b.Add("a", []byte("123456")); err != nil {
		t.Fatal(err)
	}
	if err := b.Add("a", []byte("1234567")); err != nil {
		t.Fatalf("replacing a file counted its old size: %v", err)
	}
	if err := b.Add("b", []byte("123")); err != nil {
		t.Fatalf("exactly at the limit: %v", err)
	}
	err = b.Add("c", []byte("1"))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 10 bytes") {
		t.Fatalf("one byte over: %v, want ErrTooLarge naming the limit", err)
	}

	// Open enforces the same limits.
	reg := func(name string, size int64) tar.Header {
		return tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}
	}
	if _, err := open(tarGz(t, reg("big", 11)), newLimited(10, 10)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Open of an 11-byte file with a 10-byte limit: %v, want ErrTooLarge", err)
	}
	if _, err := open(tarGz(t, reg("a", 6), reg("b", 6)), newLimited(10, 10)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Open of 12 bytes in two files with a 10-byte limit: %v, want ErrTooLarge", err)
	}
	if _, err := open(tarGz(t, reg("a", 1), reg("b", 1), reg("c", 1)), newLimited(2, 10)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Open of 3 files with a 2-file limit: %v, want ErrTooLarge", err)
	}
	if b, err := open(tarGz(t, reg("a", 5), reg("b", 5)), newLimited(2, 10)); err != nil || len(b.Names()) != 2 {
		t.Errorf("Open at the limits: %v", err)
	}
	if New().maxFiles != MaxFiles || New().maxBytes != MaxBytes {
		t.Error("New does not use MaxFiles and MaxBytes")
	}
}

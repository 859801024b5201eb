package file

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

// secretFile writes a root-only file outside the managed tree and returns
// its path and a function that fails t when it changed.
func secretFile(t *testing.T) (string, func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	writeFile(t, path, "top secret\n", 0o600)
	before := snapshot(t, path)
	return path, func() {
		t.Helper()
		if after := snapshot(t, path); after != before {
			t.Fatalf("the link's target changed: %s → %s", before, after)
		}
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestSymlinkAtPathIsReplaced(t *testing.T) {
	t.Parallel()
	cases := map[string]func(t *testing.T) (target string, unchanged func()){
		"link to a root-only file": secretFile,
		"dangling link": func(t *testing.T) (string, func()) {
			target := filepath.Join(t.TempDir(), "nowhere")
			return target, func() {
				t.Helper()
				if snapshot(t, target) != "missing" {
					t.Fatal("the dangling link's target was created")
				}
			}
		},
		"link outside the tree": func(t *testing.T) (string, func()) {
			target := filepath.Join(t.TempDir(), "elsewhere.conf")
			writeFile(t, target, "theirs\n", 0o644)
			before := snapshot(t, target)
			return target, func() {
				t.Helper()
				if after := snapshot(t, target); after != before {
					t.Fatalf("the link's target changed: %s → %s", before, after)
				}
			}
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			target, unchanged := setup(t)
			path := filepath.Join(t.TempDir(), "app.conf")
			symlink(t, target, path)
			f := build(t, path, "", map[string]any{"content": "port=1\n", "mode": "0644"})

			out := execute(t, f, resources.Env{Noop: true})
			if out.Status != resources.StatusChanged || out.Message != "would replace symlink to "+target+" with a file" {
				t.Fatalf("noop outcome %+v", out)
			}
			if strings.Contains(out.Diff, "secret") || strings.Contains(out.Diff, "theirs") {
				t.Fatalf("diff shows the link target's content: %q", out.Diff)
			}
			if got := snapshot(t, path); got != "symlink 0777 0:0" && !strings.HasPrefix(got, "symlink ") {
				t.Fatalf("noop changed the link: %s", got)
			}

			out = execute(t, f, resources.Env{})
			if out.Status != resources.StatusChanged || out.Message != "replaced symlink to "+target+" with a file" {
				t.Fatalf("outcome %+v", out)
			}
			if got := snapshot(t, path); !strings.HasPrefix(got, "file 0644 ") || !strings.HasSuffix(got, `"port=1\n"`) {
				t.Fatalf("path after apply: %s", got)
			}
			unchanged()
			if out := execute(t, f, resources.Env{}); out.Status != resources.StatusStable {
				t.Fatalf("second run %+v", out)
			}
		})
	}
}

func TestSymlinkWithoutContentIsRefused(t *testing.T) {
	t.Parallel()
	secret, unchanged := secretFile(t)
	dir := t.TempDir()
	link, dirLink := filepath.Join(dir, "app.conf"), filepath.Join(dir, "d")
	symlink(t, secret, link)
	symlink(t, filepath.Dir(secret), dirLink)
	dirBefore := snapshot(t, filepath.Dir(secret))
	for _, tc := range []struct {
		path, ensure string
		want         string
	}{
		{link, "present", "is a symlink to " + secret},
		{dirLink, "directory", "exists and is not a directory (symlink to " + filepath.Dir(secret) + ")"},
	} {
		for _, noop := range []bool{true, false} {
			out := execute(t, build(t, tc.path, tc.ensure, map[string]any{"mode": "0777", "owner": "65534"}), resources.Env{Noop: noop})
			if out.Status != resources.StatusFailed || !errors.Is(out.Err, ErrSymlink) || !strings.Contains(out.Message, tc.want) {
				t.Fatalf("%s (noop %v): outcome %+v", tc.path, noop, out)
			}
		}
	}
	unchanged()
	if after := snapshot(t, filepath.Dir(secret)); after != dirBefore {
		t.Fatalf("the linked directory changed: %s → %s", dirBefore, after)
	}
}

func TestLinksFollow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	real, link := filepath.Join(dir, "real"), filepath.Join(dir, "link")
	writeFile(t, real, "x", 0o600)
	symlink(t, real, link)
	out := execute(t, build(t, link, "", map[string]any{"mode": "0640", "links": "follow"}), resources.Env{})
	if out.Status != resources.StatusChanged || out.Message != "set mode 0600 → 0640" {
		t.Fatalf("outcome %+v", out)
	}
	if got := snapshot(t, real); !strings.HasPrefix(got, "file 0640 ") {
		t.Fatalf("target %s", got)
	}

	realDir, dirLink := filepath.Join(dir, "realdir"), filepath.Join(dir, "dirlink")
	if err := os.Mkdir(realDir, 0o700); err != nil {
		t.Fatal(err)
	}
	symlink(t, realDir, dirLink)
	if out := execute(t, build(t, dirLink, "directory", map[string]any{"mode": "0750", "links": "follow"}), resources.Env{}); out.Status != resources.StatusChanged {
		t.Fatalf("directory outcome %+v", out)
	}
	if got := snapshot(t, realDir); !strings.HasPrefix(got, "directory 0750 ") {
		t.Fatalf("target directory %s", got)
	}

	dangling := filepath.Join(dir, "dangling")
	symlink(t, filepath.Join(dir, "nowhere"), dangling)
	out = execute(t, build(t, dangling, "", map[string]any{"content": "x", "links": "follow"}), resources.Env{})
	if out.Status != resources.StatusFailed || !strings.Contains(out.Message, "dangling symlink") {
		t.Fatalf("dangling outcome %+v", out)
	}
}

// TestSharedParentDirectory: in a directory another user can write (0777,
// owned by nobody), that user may plant links at the managed path; manifold
// replaces them, writes its temporary file with O_EXCL (never through a
// link) and never changes what they point to.
func TestSharedParentDirectory(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to hand the directory to nobody")
	}
	secret, unchanged := secretFile(t)
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(shared, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(shared, "app.conf")
	symlink(t, secret, path)
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	out := execute(t, build(t, path, "", map[string]any{"content": "ok\n", "mode": "0600", "owner": "0", "group": "0"}), resources.Env{})
	if out.Status != resources.StatusChanged {
		t.Fatalf("outcome %+v", out)
	}
	if got := snapshot(t, path); got != `file 0600 0:0 "ok\n"` {
		t.Fatalf("path %s", got)
	}
	unchanged()
}

// TestApplyRefusesSwappedPath: a path replaced by a symbolic link between
// check and apply is not chmodded through the link.
func TestApplyRefusesSwappedPath(t *testing.T) {
	t.Parallel()
	secret, unchanged := secretFile(t)
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "x", 0o600)
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	f := build(t, path, "", map[string]any{"mode": "0666"})
	want, err := f.wantMeta()
	if err != nil {
		t.Fatal(err)
	}
	// The check saw a regular file; now someone swaps it for a link. The
	// original is moved aside, not removed, so its inode number cannot be
	// reused by the replacement below.
	if err := os.Rename(path, path+".orig"); err != nil {
		t.Fatal(err)
	}
	symlink(t, secret, path)
	if err := want.applyTo(path, fi, metaOf(fi)); !errors.Is(err, ErrChanged) {
		t.Fatalf("applyTo through a swapped link: %v", err)
	}
	// And a different regular file put in its place is refused too.
	// (Written beside it first, so it cannot reuse the inode number.)
	other := path + ".other"
	writeFile(t, other, "other", 0o600)
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if err := want.applyTo(path, fi, metaOf(fi)); !errors.Is(err, ErrChanged) {
		t.Fatalf("applyTo on a replaced file: %v", err)
	}
	unchanged()
}

func TestForce(t *testing.T) {
	t.Parallel()
	secret, unchanged := secretFile(t)
	dir := filepath.Join(t.TempDir(), "tree")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub", "f"), "x", 0o644)
	symlink(t, secret, filepath.Join(dir, "link"))

	out := execute(t, build(t, dir, "absent", nil), resources.Env{})
	if out.Status != resources.StatusFailed || !strings.Contains(out.Message, "set force: true") {
		t.Fatalf("without force: %+v", out)
	}
	f := build(t, dir, "absent", map[string]any{"force": true})
	out = execute(t, f, resources.Env{Noop: true})
	if out.Message != "would remove directory and its 2 entries" {
		t.Fatalf("noop %+v", out)
	}
	if snapshot(t, dir) == "missing" {
		t.Fatal("noop removed the tree")
	}
	if out := execute(t, f, resources.Env{}); out.Status != resources.StatusChanged {
		t.Fatalf("outcome %+v", out)
	}
	if snapshot(t, dir) != "missing" {
		t.Fatal("tree still there")
	}
	unchanged()
	if out := execute(t, f, resources.Env{}); out.Status != resources.StatusStable {
		t.Fatalf("second run %+v", out)
	}
}

func TestDiffPolicy(t *testing.T) {
	t.Parallel()
	tru, fals := true, false
	tests := []struct {
		name     string
		mode     os.FileMode // of the existing file
		props    map[string]any
		shown    bool
		contains string
	}{
		{"world-readable", 0o644, nil, true, "-old\n+new\n"},
		{"not world-readable", 0o640, nil, false, "is not readable by other users (set show_diff: true to show it)"},
		{"new mode not world-readable", 0o644, map[string]any{"mode": "0600"}, false, "is not readable by other users"},
		{"world-readable in a 0700 directory", 0o644, map[string]any{"dir_mode": 0o700}, false, "is not readable by other users"},
		{"show_diff true", 0o600, map[string]any{"show_diff": tru}, true, "-old\n+new\n"},
		{"show_diff false", 0o644, map[string]any{"show_diff": fals}, false, "diff hidden (show_diff: false): 4 → 4 bytes"},
		{"sensitive", 0o644, map[string]any{"sensitive": true, "show_diff": tru}, false, "content redacted (sensitive): 4 → 4 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := publicDir(t)
			props := map[string]any{"content": "new\n"}
			for k, v := range tt.props {
				props[k] = v
			}
			if m, ok := props["dir_mode"].(int); ok {
				delete(props, "dir_mode")
				dir = filepath.Join(dir, "private")
				if err := os.Mkdir(dir, os.FileMode(m)); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "f")
			writeFile(t, path, "old\n", tt.mode)
			for _, noop := range []bool{true, false} {
				out := execute(t, build(t, path, "", props), resources.Env{Noop: noop})
				if out.Status != resources.StatusChanged || !strings.Contains(out.Diff, tt.contains) {
					t.Fatalf("noop %v: outcome %+v, want diff containing %q", noop, out, tt.contains)
				}
				if shown := strings.Contains(out.Diff, "old") || strings.Contains(out.Message, "old"); shown != tt.shown {
					t.Fatalf("noop %v: content shown %v, want %v: %+v", noop, shown, tt.shown, out)
				}
				writeFile(t, path, "old\n", tt.mode)
			}
		})
	}

	t.Run("sensitive new file", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "f")
		out := execute(t, build(t, path, "", map[string]any{"content": "hunter2", "sensitive": true}), resources.Env{Noop: true})
		if strings.Contains(out.Diff+out.Message, "hunter2") || out.Diff != "content redacted (sensitive): 0 → 7 bytes" {
			t.Fatalf("outcome %+v", out)
		}
	})
}

func TestDiffBound(t *testing.T) {
	t.Parallel()
	at := strings.Repeat(strings.Repeat("x", 63)+"\n", MaxDiffBytes/64)
	if len(at) != MaxDiffBytes || truncateDiff(at) != at {
		t.Fatalf("a diff of exactly %d bytes was changed", MaxDiffBytes)
	}
	over := truncateDiff(at + "y\n")
	if len(over) > MaxDiffBytes || !strings.HasSuffix(over, "[manifold: diff truncated: "+strconv.Itoa(len(at)+2-strings.Index(over, "[manifold"))+" more bytes]\n") {
		t.Fatalf("truncated diff: %d bytes, ends %q", len(over), over[max(0, len(over)-80):])
	}

	// A whole-file rewrite of 900 lines of 100 bytes makes a diff of about
	// 180 KB: the outcome carries at most MaxDiffBytes of it.
	path := filepath.Join(publicDir(t), "big")
	writeFile(t, path, strings.Repeat(strings.Repeat("a", 99)+"\n", 900), 0o644)
	out := execute(t, build(t, path, "", map[string]any{"content": strings.Repeat(strings.Repeat("b", 99)+"\n", 900)}), resources.Env{Noop: true})
	if len(out.Diff) > MaxDiffBytes || !strings.Contains(out.Diff, "[manifold: diff truncated: ") || !strings.HasPrefix(out.Diff, "--- "+path) {
		t.Fatalf("diff of %d bytes, tail %q", len(out.Diff), out.Diff[max(0, len(out.Diff)-80):])
	}
}

func TestSourceStaysInWorkDir(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	secret, _ := secretFile(t)
	writeFile(t, filepath.Join(work, "motd"), "hi\n", 0o644)
	symlink(t, secret, filepath.Join(work, "sneaky"))
	if err := os.Mkdir(filepath.Join(work, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		source string
		ok     bool
	}{
		{"motd", true},
		{filepath.Join(work, "motd"), true},
		{"sub/../motd", true},
		{secret, false},
		{"sneaky", false},
		{filepath.Join(work, "sub", "..", "..", filepath.Base(work), "motd"), true},
	} {
		path := filepath.Join(t.TempDir(), "out")
		out := execute(t, build(t, path, "", map[string]any{"source": tc.source}), resources.Env{WorkDir: work})
		if tc.ok {
			if out.Status != resources.StatusChanged {
				t.Fatalf("source %s: %+v", tc.source, out)
			}
			continue
		}
		if out.Status != resources.StatusFailed || !errors.Is(out.Err, ErrSourceOutside) {
			t.Fatalf("source %s: %+v, want %v", tc.source, out, ErrSourceOutside)
		}
		if strings.Contains(out.Diff, "secret") {
			t.Fatalf("diff shows the secret: %q", out.Diff)
		}
	}
}

func TestNumericIDs(t *testing.T) {
	t.Parallel()
	res, err := New(resources.Spec{Type: Type, Name: "/x", Properties: map[string]any{"owner": 54321, "group": "54322"}})
	if err != nil {
		t.Fatal(err)
	}
	if f := res.(*File); f.Owner != "54321" || f.Group != "54322" {
		t.Fatalf("owner %q group %q", f.Owner, f.Group)
	}
	for _, bad := range []any{-1, 1.5, true} {
		if _, err := New(resources.Spec{Type: Type, Name: "/x", Properties: map[string]any{"owner": bad}}); err == nil || !strings.Contains(err.Error(), `property "owner"`) {
			t.Fatalf("owner %v: %v", bad, err)
		}
	}
	if os.Getuid() != 0 {
		return
	}
	// Ids with no passwd or group entry are set as they are.
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "x", 0o644)
	f := build(t, path, "", map[string]any{"owner": 54321, "group": 54322})
	if out := execute(t, f, resources.Env{}); out.Status != resources.StatusChanged || out.Message != "set owner 0 → 54321, set group 0 → 54322" {
		t.Fatalf("outcome %+v", out)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 54321 || st.Gid != 54322 {
		t.Fatalf("owner %d:%d", st.Uid, st.Gid)
	}
}

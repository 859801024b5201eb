package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/conformance"
)

// build makes a validated file resource the way the registry does.
func build(t *testing.T, path, ensure string, props map[string]any) *File {
	t.Helper()
	res, err := New(resources.Spec{Type: Type, Name: path, Ensure: ensure, Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Validate(); err != nil {
		t.Fatal(err)
	}
	return res.(*File)
}

func execute(t *testing.T, f *File, env resources.Env) resources.Outcome {
	t.Helper()
	return resources.Execute(context.Background(), f, &env)
}

// snapshot describes path: kind, mode, owner, content.
func snapshot(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "missing"
	}
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	s := fmt.Sprintf("%s %s %d:%d", typeName(fi), modeString(fi.Mode()&permBits), st.Uid, st.Gid)
	if fi.Mode().IsRegular() {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s += " " + strconv.Quote(string(b))
	}
	return s
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	cases := map[string]struct {
		ensure string
		props  map[string]any
		setup  func(t *testing.T, path string)
	}{
		"create": {props: map[string]any{"content": "hello\n", "mode": "0640", "owner": uid, "group": gid}},
		"update content": {
			props: map[string]any{"content": "new\n"},
			setup: func(t *testing.T, p string) { writeFile(t, p, "old\n", 0o600) },
		},
		"mode only": {
			props: map[string]any{"mode": "0644"},
			setup: func(t *testing.T, p string) { writeFile(t, p, "keep", 0o600) },
		},
		"absent":    {ensure: "absent", setup: func(t *testing.T, p string) { writeFile(t, p, "x", 0o644) }},
		"directory": {ensure: "directory", props: map[string]any{"mode": "0750"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "target")
			if tc.setup != nil {
				tc.setup(t, path)
			}
			conformance.Run(t, conformance.Case{
				New: func(t *testing.T) (resources.Resource, *resources.Env) {
					return build(t, path, tc.ensure, tc.props), &resources.Env{}
				},
				Snapshot: func(t *testing.T) string { return snapshot(t, path) },
			})
		})
	}
}

func TestPresent(t *testing.T) {
	t.Parallel()

	t.Run("create", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(publicDir(t), "app.conf")
		out := execute(t, build(t, path, "", map[string]any{"content": "port=8080\n"}), resources.Env{})
		if out.Status != resources.StatusChanged || out.Message != "created" {
			t.Fatalf("outcome %+v", out)
		}
		if !strings.Contains(out.Diff, "+port=8080\n") {
			t.Fatalf("diff %q", out.Diff)
		}
		if got := snapshot(t, path); !strings.HasPrefix(got, "file 0644 ") || !strings.HasSuffix(got, `"port=8080\n"`) {
			t.Fatalf("snapshot %s", got)
		}
		if out := execute(t, build(t, path, "", map[string]any{"content": "port=8080\n"}), resources.Env{}); out.Status != resources.StatusStable {
			t.Fatalf("second run %+v", out)
		}
	})

	t.Run("empty file without content", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "marker")
		if out := execute(t, build(t, path, "present", nil), resources.Env{}); out.Status != resources.StatusChanged {
			t.Fatalf("outcome %+v", out)
		}
		writeFile(t, path, "someone else's content", 0o644)
		if out := execute(t, build(t, path, "present", nil), resources.Env{}); out.Status != resources.StatusStable {
			t.Fatalf("unmanaged content changed: %+v", out)
		}
	})

	t.Run("update keeps mode", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "f")
		writeFile(t, path, "a\nb\nc\n", 0o600)
		out := execute(t, build(t, path, "", map[string]any{"content": "a\nB\nc\n", "show_diff": true}), resources.Env{})
		if out.Status != resources.StatusChanged || out.Message != "updated content" {
			t.Fatalf("outcome %+v", out)
		}
		want := "--- " + path + "\n+++ " + path + " (desired)\n@@\n a\n-b\n+B\n c\n"
		if out.Diff != want {
			t.Fatalf("diff\n%s\nwant\n%s", out.Diff, want)
		}
		if got := snapshot(t, path); !strings.HasPrefix(got, "file 0600 ") {
			t.Fatalf("mode not kept: %s", got)
		}
		entries, _ := os.ReadDir(filepath.Dir(path))
		if len(entries) != 1 {
			t.Fatalf("temporary files left behind: %v", entries)
		}
	})

	t.Run("content and mode", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "f")
		writeFile(t, path, "old", 0o600)
		f := build(t, path, "", map[string]any{"content": "new", "mode": "0644"})
		out := execute(t, f, resources.Env{Noop: true})
		if out.Message != "would update content, set mode 0600 → 0644" {
			t.Fatalf("noop message %q", out.Message)
		}
		out = execute(t, f, resources.Env{})
		if out.Status != resources.StatusChanged || out.Message != "updated content, set mode 0600 → 0644" {
			t.Fatalf("outcome %+v", out)
		}
		if got := snapshot(t, path); !strings.HasPrefix(got, "file 0644 ") || !strings.HasSuffix(got, `"new"`) {
			t.Fatalf("snapshot %s", got)
		}
	})

	t.Run("setuid mode", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "f")
		writeFile(t, path, "", 0o755)
		if out := execute(t, build(t, path, "", map[string]any{"mode": "4755"}), resources.Env{}); out.Status != resources.StatusChanged {
			t.Fatalf("outcome %+v", out)
		}
		if got := snapshot(t, path); !strings.HasPrefix(got, "file 4755 ") {
			t.Fatalf("snapshot %s", got)
		}
	})

	t.Run("source relative to work dir", func(t *testing.T) {
		t.Parallel()
		work := t.TempDir()
		writeFile(t, filepath.Join(work, "motd.txt"), "welcome\n", 0o644)
		path := filepath.Join(t.TempDir(), "motd")
		f := build(t, path, "", map[string]any{"source": "motd.txt"})
		if out := execute(t, f, resources.Env{WorkDir: work}); out.Status != resources.StatusChanged {
			t.Fatalf("outcome %+v", out)
		}
		if b, _ := os.ReadFile(path); string(b) != "welcome\n" {
			t.Fatalf("content %q", b)
		}
		out := execute(t, f, resources.Env{WorkDir: t.TempDir()})
		if out.Status != resources.StatusFailed || !errors.Is(out.Err, fs.ErrNotExist) || !strings.Contains(out.Message, "source motd.txt:") {
			t.Fatalf("missing source: %+v", out)
		}
	})

	t.Run("links follow writes the target", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		real, link := filepath.Join(dir, "real"), filepath.Join(dir, "link")
		writeFile(t, real, "old", 0o644)
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		if out := execute(t, build(t, link, "", map[string]any{"content": "new", "links": "follow"}), resources.Env{}); out.Status != resources.StatusChanged {
			t.Fatalf("outcome %+v", out)
		}
		if got := snapshot(t, link); !strings.HasPrefix(got, "symlink") {
			t.Fatalf("link replaced: %s", got)
		}
		if b, _ := os.ReadFile(real); string(b) != "new" {
			t.Fatalf("target content %q", b)
		}
	})

	t.Run("binary diff is a summary", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(publicDir(t), "bin")
		writeFile(t, path, "\x00\x01", 0o644)
		out := execute(t, build(t, path, "", map[string]any{"content": "text"}), resources.Env{Noop: true})
		if !strings.HasPrefix(out.Diff, "size 2 → 4 bytes, sha256 ") {
			t.Fatalf("diff %q", out.Diff)
		}
	})
}

func TestFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "full"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "full", "x"), "", 0o644)
	writeFile(t, filepath.Join(dir, "plain"), "", 0o644)
	tests := []struct {
		name   string
		path   string
		ensure string
		props  map[string]any
		noop   bool
		want   string
	}{
		{name: "missing parent", path: filepath.Join(dir, "nope", "f"), props: map[string]any{"content": "x"},
			want: "parent directory " + filepath.Join(dir, "nope") + " does not exist"},
		{name: "missing parent in noop", path: filepath.Join(dir, "nope", "f"), noop: true,
			want: "does not exist"},
		{name: "missing parent of directory", path: filepath.Join(dir, "nope", "d"), ensure: "directory",
			want: "parent directory " + filepath.Join(dir, "nope") + " does not exist"},
		{name: "directory where a file is wanted", path: filepath.Join(dir, "full"), want: "is a directory"},
		{name: "file where a directory is wanted", path: filepath.Join(dir, "plain"), ensure: "directory", want: "exists and is not a directory (file)"},
		{name: "absent non-empty directory", path: filepath.Join(dir, "full"), ensure: "absent", want: "refusing to remove non-empty directory"},
		{name: "unknown owner", path: filepath.Join(dir, "plain"), props: map[string]any{"owner": "no-such-user-manifold"}, want: `owner "no-such-user-manifold"`},
		{name: "unknown group", path: filepath.Join(dir, "plain"), props: map[string]any{"group": "no-such-group-manifold"}, want: `group "no-such-group-manifold"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := snapshot(t, tt.path)
			out := execute(t, build(t, tt.path, tt.ensure, tt.props), resources.Env{Noop: tt.noop})
			if out.Status != resources.StatusFailed || !strings.Contains(out.Err.Error(), tt.want) {
				t.Fatalf("outcome %+v, want failure containing %q", out, tt.want)
			}
			if after := snapshot(t, tt.path); after != before {
				t.Fatalf("failed run changed %s: %s → %s", tt.path, before, after)
			}
		})
	}
}

func TestAbsent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file, empty, missing := filepath.Join(dir, "f"), filepath.Join(dir, "empty"), filepath.Join(dir, "missing")
	writeFile(t, file, "x", 0o644)
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for path, msg := range map[string]string{file: "removed file", empty: "removed directory"} {
		out := execute(t, build(t, path, "absent", nil), resources.Env{})
		if out.Status != resources.StatusChanged || out.Message != msg {
			t.Fatalf("%s: outcome %+v", path, out)
		}
		if snapshot(t, path) != "missing" {
			t.Fatalf("%s still exists", path)
		}
	}
	if out := execute(t, build(t, missing, "absent", nil), resources.Env{}); out.Status != resources.StatusStable {
		t.Fatalf("outcome %+v", out)
	}
}

func TestDirectory(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "d")
	out := execute(t, build(t, path, "directory", nil), resources.Env{})
	if out.Status != resources.StatusChanged || out.Message != "created directory" {
		t.Fatalf("outcome %+v", out)
	}
	if got := snapshot(t, path); !strings.HasPrefix(got, "directory 0755 ") {
		t.Fatalf("snapshot %s", got)
	}
	out = execute(t, build(t, path, "directory", map[string]any{"mode": "0700"}), resources.Env{})
	if out.Status != resources.StatusChanged || out.Message != "set mode 0755 → 0700" {
		t.Fatalf("outcome %+v", out)
	}
	if out := execute(t, build(t, path, "directory", map[string]any{"mode": "0700"}), resources.Env{}); out.Status != resources.StatusStable {
		t.Fatalf("outcome %+v", out)
	}
}

func TestOwnerAndGroup(t *testing.T) {
	t.Parallel()
	u, err := user.Current()
	if err != nil {
		t.Skip("no current user:", err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		t.Skip("no primary group:", err)
	}
	for name, props := range map[string]map[string]any{
		"numeric": {"owner": u.Uid, "group": u.Gid},
		"names":   {"owner": u.Username, "group": g.Name},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "owned")
			writeFile(t, path, "x", 0o644)
			if out := execute(t, build(t, path, "", props), resources.Env{}); out.Status != resources.StatusStable {
				t.Fatalf("own file: %+v", out)
			}
			if os.Getuid() != 0 {
				return
			}
			// As root, hand the file to nobody and take it back.
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			f := build(t, path, "", props)
			out := execute(t, f, resources.Env{Noop: true})
			want := fmt.Sprintf("would set owner 65534 → %s, set group 65534 → %s", u.Uid, u.Gid)
			if out.Message != want {
				t.Fatalf("noop message %q, want %q", out.Message, want)
			}
			if out := execute(t, f, resources.Env{}); out.Status != resources.StatusChanged {
				t.Fatalf("outcome %+v", out)
			}
			if got, want := snapshot(t, path), fmt.Sprintf("file 0644 %s:%s", u.Uid, u.Gid); !strings.HasPrefix(got, want) {
				t.Fatalf("snapshot %s, want %s", got, want)
			}
		})
	}

	if os.Getuid() == 0 {
		t.Run("content rewrite keeps foreign owner", func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "f")
			writeFile(t, path, "old", 0o640)
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			if out := execute(t, build(t, path, "", map[string]any{"content": "new"}), resources.Env{}); out.Status != resources.StatusChanged {
				t.Fatalf("outcome %+v", out)
			}
			if got := snapshot(t, path); got != `file 0640 65534:65534 "new"` {
				t.Fatalf("snapshot %s", got)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	content := "x"
	tests := []struct {
		name string
		f    *File
		want string
	}{
		{"relative", &File{Path: "etc/motd"}, `name "etc/motd": must be an absolute path`},
		{"root", &File{Path: "/", Ensure: EnsureAbsent}, "refusing to manage the root directory"},
		{"bad ensure", &File{Path: "/x", Ensure: "link"}, `ensure "link": must be present, absent or directory`},
		{"content and source", &File{Path: "/x", Properties: Properties{Content: &content, Source: "s"}}, "mutually exclusive"},
		{"content on absent", &File{Path: "/x", Ensure: EnsureAbsent, Properties: Properties{Content: &content}}, "apply only to ensure present"},
		{"bad mode", &File{Path: "/x", Properties: Properties{Mode: "rw-r--r--"}}, `mode "rw-r--r--": want an octal mode`},
		{"mode too big", &File{Path: "/x", Properties: Properties{Mode: "17777"}}, `mode "17777"`},
		{"ok", &File{Path: "/x", Properties: Properties{Mode: "0o644"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.f.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}

	if _, err := New(resources.Spec{Name: "/x", Properties: map[string]any{"contents": "x"}}); err == nil || err.Error() != `unknown property "contents"` {
		t.Fatalf("unknown property: %v", err)
	}
}

func TestCancelled(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := resources.Execute(ctx, build(t, path, "", map[string]any{"content": "x"}), &resources.Env{})
	if out.Status != resources.StatusFailed || !errors.Is(out.Err, context.Canceled) {
		t.Fatalf("outcome %+v", out)
	}
	if snapshot(t, path) != "missing" {
		t.Fatal("cancelled run wrote the file")
	}
}

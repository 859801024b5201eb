package file

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

// TestNoopAssumedParent: in noop, a file whose parent directory another
// resource of the run would create is "would create" with its content's
// diff (the new directories world-searchable) or the diff hidden (one of
// them not); an owner the run would create is no error; outside noop, or
// with a parent nobody creates, the missing parent still fails.
func TestNoopAssumedParent(t *testing.T) {
	base := t.TempDir()
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "app", "conf")
	path := filepath.Join(dir, "x.conf")
	props := map[string]any{"content": "a = 1\n", "owner": "manifold-nosuch-user"}
	assume := &resources.Assumed{Dirs: map[string]fs.FileMode{filepath.Join(base, "app"): 0o755, dir: 0o755},
		Users: []string{"manifold-nosuch-user"}}

	out := execute(t, build(t, path, "", props), resources.Env{Noop: true, Assume: assume})
	if out.Status != resources.StatusChanged || out.Message != "would create" || !strings.Contains(out.Diff, "+a = 1\n") {
		t.Fatalf("noop with the parent assumed: %+v", out)
	}
	assume.Dirs[filepath.Join(base, "app")] = 0o700
	out = execute(t, build(t, path, "", props), resources.Env{Noop: true, Assume: assume})
	if out.Status != resources.StatusChanged || !strings.HasPrefix(out.Diff, "diff hidden: ") {
		t.Fatalf("noop under a directory others cannot search: %+v", out)
	}
	if out := execute(t, build(t, dir, "directory", nil), resources.Env{Noop: true, Assume: assume}); out.Message != "would create directory" {
		t.Fatalf("noop directory with the parent assumed: %+v", out)
	}
	for name, env := range map[string]resources.Env{
		"noop, nothing assumed":   {Noop: true},
		"not noop, with assumed":  {Assume: assume},
		"noop, another directory": {Noop: true, Assume: &resources.Assumed{Dirs: map[string]fs.FileMode{"/elsewhere": 0o755}}},
	} {
		out := execute(t, build(t, path, "", map[string]any{"content": "a\n"}), env)
		if out.Status != resources.StatusFailed || !strings.Contains(out.Message, "parent directory") {
			t.Errorf("%s: want the missing parent to fail, got %+v", name, out)
		}
	}
	if _, err := os.Stat(filepath.Join(base, "app")); err == nil {
		t.Fatal("noop created the directory")
	}

	// An existing file whose owner the run would create: noop says it
	// would set it.
	existing := filepath.Join(base, "e.conf")
	if err := os.WriteFile(existing, []byte("a = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = execute(t, build(t, existing, "", props), resources.Env{Noop: true, Assume: assume})
	if out.Status != resources.StatusChanged || !strings.Contains(out.Message, "manifold-nosuch-user (a user this run creates)") {
		t.Fatalf("noop, assumed owner of an existing file: %+v", out)
	}
	if out := execute(t, build(t, existing, "", props), resources.Env{Noop: true}); out.Status != resources.StatusFailed {
		t.Fatalf("noop, unknown owner not assumed: want failed, got %+v", out)
	}
}

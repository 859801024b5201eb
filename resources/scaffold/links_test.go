package scaffold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/conformance"
)

func TestConformanceLinks(t *testing.T) {
	t.Parallel()
	conformance.RunLinks(t, conformance.WriteCase{
		New: func(t *testing.T, path string) (resources.Resource, *resources.Env) {
			work := t.TempDir()
			if err := os.Mkdir(filepath.Join(work, "tpl"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(work, "tpl", filepath.Base(path)), []byte(`{"port": 1}`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := New(resources.Spec{Type: Type, Name: filepath.Dir(path), Properties: map[string]any{"source": "tpl"}})
			if err != nil {
				t.Fatal(err)
			}
			return res, &resources.Env{WorkDir: work}
		},
		LinkAtPath: conformance.LinkReplaced,
	})
}

// TestSymlinkedParentOfTarget: a link owned by another user above the
// target is never followed, by check or apply.
func TestSymlinkedParentOfTarget(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("needs root to hand the link to nobody")
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.Mkdir(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(home, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(home, "sub"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "tpl"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "tpl", "a.conf"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, noop := range []bool{true, false} {
		res, err := New(resources.Spec{Type: Type, Name: filepath.Join(home, "sub", "app"), Properties: map[string]any{"source": "tpl"}})
		if err != nil {
			t.Fatal(err)
		}
		out := resources.Execute(t.Context(), res, &resources.Env{WorkDir: work, Noop: noop})
		if out.Status != resources.StatusFailed || !strings.Contains(out.Message, filepath.Join(home, "sub")+" is a symlink") {
			t.Fatalf("noop %v: %+v", noop, out)
		}
	}
	if entries, _ := os.ReadDir(secret); len(entries) != 0 {
		t.Fatalf("written through the link: %v", entries)
	}
}

package compile

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/internal/bundle"
)

func TestBuildCollectsChildrenAndSources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml": `
data: {lib: lib}
resources:
  - file:
      - /tmp/x: {source: files/root.txt}
  - apply:
      - sub/manifest.yaml: {data: {inner: "{{ data.lib }}"}}
      - ./sub/manifest.yaml: {alias: again}
  - {type: apply, name: /flat.yaml}
`,
		"files/root.txt": "root\n",
		"sub/manifest.yaml": `
resources:
  - apply:
      - "{{ data.inner }}/manifest.yaml": {}
  - file:
      - /tmp/y: {source: sub.txt}
      - /tmp/z: {source: /etc/hostname}
      - /tmp/w: {content: "inline"}
`,
		"sub/sub.txt":           "sub\n",
		"sub/lib/manifest.yaml": "resources:\n  - file:\n      - /tmp/l: {source: ../../files/shared.txt}\n",
		"files/shared.txt":      "shared\n",
		"flat.yaml":             "resources:\n  - apply:\n      - manifest.yaml: {}\n", // a cycle back to the root
		"unreferenced.txt":      "not bundled\n",
	})
	tr, err := Build(filepath.Join(dir, "manifest.yaml"), Opts{})
	if err != nil {
		t.Fatal(err)
	}
	b, entry := tr.Bundle, tr.Entry
	if entry != "manifest.yaml" {
		t.Errorf("entry = %q, want manifest.yaml", entry)
	}
	want := []string{"files/root.txt", "files/shared.txt", "flat.yaml", "manifest.yaml", "sub/lib/manifest.yaml", "sub/manifest.yaml", "sub/sub.txt"}
	if got := b.Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	if got, _ := b.Read("sub/sub.txt"); string(got) != "sub\n" {
		t.Errorf("sub/sub.txt = %q", got)
	}
	if _, err := b.Read("unreferenced.txt"); !errors.Is(err, bundle.ErrNotInBundle) {
		t.Errorf("Read(unreferenced.txt): %v, want bundle.ErrNotInBundle", err)
	}
}

func TestBuildRefusesEscapes(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.yaml": "resources: []\n", "secret.txt": "secret\n"})
	tests := map[string]struct {
		files map[string]string
		link  string // name of a symlink in the root to outside/secret.*
	}{
		"apply with dot-dot": {files: map[string]string{"manifest.yaml": "resources:\n  - apply:\n      - ../../etc/x: {}\n"}},
		"source with dot-dot": {files: map[string]string{
			"manifest.yaml": "resources:\n  - file:\n      - /tmp/x: {source: ../secret.txt}\n"}},
		"child manifest is a symlink out": {link: "child.yaml", files: map[string]string{
			"manifest.yaml": "resources:\n  - apply:\n      - child.yaml: {}\n"}},
		"source is a symlink out": {link: "src.txt", files: map[string]string{
			"manifest.yaml": "resources:\n  - file:\n      - /tmp/x: {source: src.txt}\n"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeTree(t, dir, tt.files)
			if tt.link != "" {
				target := filepath.Join(outside, "secret"+filepath.Ext(tt.link))
				if err := os.Symlink(target, filepath.Join(dir, tt.link)); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Build(filepath.Join(dir, "manifest.yaml"), Opts{})
			if !errors.Is(err, bundle.ErrEscapes) {
				t.Fatalf("Build: %v, want bundle.ErrEscapes", err)
			}
		})
	}

	// A symlink that stays inside the root is followed.
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"manifest.yaml": "resources:\n  - apply:\n      - link.yaml: {}\n", "real.yaml": "resources: []\n"})
	if err := os.Symlink("real.yaml", filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	tr, err := Build(filepath.Join(dir, "manifest.yaml"), Opts{})
	if err != nil {
		t.Fatalf("Build with an inside symlink: %v", err)
	}
	b := tr.Bundle
	if got, _ := b.Read("link.yaml"); string(got) != "resources: []\n" {
		t.Errorf("link.yaml = %q, want the target's content", got)
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"m.yaml": "resources:\n  - file:\n      - /tmp/x: {source: s.txt}\n", "s.txt": "s"})
	digest := func() [32]byte {
		tr, err := Build(filepath.Join(dir, "m.yaml"), Opts{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := tr.Bundle.Archive()
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(data)
	}
	if digest() != digest() {
		t.Error("Build+Archive of the same directory twice gave two digests")
	}
}

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

// TestBuildBundlesTheFilesTemplatesName: among resources that name no
// file, the files named by a property, a list inside a property and a map
// inside a property are bundled, and only they (checkSyntax lists the
// resources that may name one; the others are not walked). The templates
// need facts, so the compile does not render them (which bundles what
// they read): templateFiles must find the files.
func TestBuildBundlesTheFilesTemplatesName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var m strings.Builder
	m.WriteString("data: {x: 1}\nresources:\n  - file:\n")
	for i := range 30 {
		fmt.Fprintf(&m, "      - /tmp/b/f%d: {content: \"{{ data.x }} %d\"}\n", i, i)
		switch i {
		case 3:
			m.WriteString("      - /tmp/b/t: {content: \"{{ lookup('facts.x') }}{{ template('t/a.templ') }}\"}\n")
		case 17:
			m.WriteString("  - exec:\n      - /bin/true:\n          environment: [\"A={{ lookup('facts.x') }}{{ file('t/env.txt') }}\"]\n  - file:\n")
		case 29:
			m.WriteString("  - document:\n      - /tmp/b/doc.json: {content: {a: \"{{ lookup('facts.x') }}{{ jet('t/doc.jet') }}\"}}\n")
		}
	}
	writeTree(t, dir, map[string]string{
		"m.yaml": m.String(), "t/a.templ": "a", "t/env.txt": "e", "t/doc.jet": "d", "t/unused.txt": "u",
	})
	tr, err := Build(filepath.Join(dir, "m.yaml"), Opts{})
	require.NoError(t, err)
	require.Equal(t, []string{"m.yaml", "t/a.templ", "t/doc.jet", "t/env.txt"}, tr.Bundle.Names())
}

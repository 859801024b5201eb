package scaffold

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

func TestLimits(t *testing.T) {
	t.Parallel()
	small := limits{templates: 3, fileBytes: 10, totalBytes: 25, targetEntries: 4}
	cases := []struct {
		name   string
		files  map[string]string
		target map[string]string
		ok     bool
	}{
		{"templates at the limit", map[string]string{"tpl/a": "a", "tpl/b": "b", "tpl/_partials/c": "c"}, nil, true},
		{"templates past the limit", map[string]string{"tpl/a": "a", "tpl/b": "b", "tpl/c": "c", "tpl/d": "d"}, nil, false},
		{"template at the size limit", map[string]string{"tpl/a": strings.Repeat("x", 10)}, nil, true},
		{"template past the size limit", map[string]string{"tpl/a": strings.Repeat("x", 11)}, nil, false},
		{"rendering grows past the size limit", map[string]string{"tpl/a": `[[ data.s ]]`}, nil, false},
		{"total at the limit", map[string]string{"tpl/a": strings.Repeat("x", 10), "tpl/b": strings.Repeat("x", 10), "tpl/c": "12345"}, nil, true},
		{"total past the limit", map[string]string{"tpl/a": strings.Repeat("x", 10), "tpl/b": strings.Repeat("x", 10), "tpl/c": "123456"}, nil, false},
		{"target entries at the limit", map[string]string{"tpl/a": "a"}, map[string]string{"a": "a", "b": "b", "d/c": "c"}, true},
		{"target entries past the limit", map[string]string{"tpl/a": "a"}, map[string]string{"a": "a", "b": "b", "c": "c", "d/e": "e"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := bundle(t, tc.files)
			target := bundle(t, tc.target)
			s := build(t, target, map[string]any{"source": "tpl", "purge": true})
			s.lim = small
			env := testEnv(dir)
			env.Data = map[string]any{"s": strings.Repeat("y", 11)}
			_, err := s.CheckApply(context.Background(), env, true)
			if tc.ok && err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("past the limit: got %v, want ErrTooLarge", err)
			}
		})
	}
}

func TestRenderDepthLimit(t *testing.T) {
	t.Parallel()
	dir := bundle(t, map[string]string{"tpl/a": `[[ render("_partials/loop", .) ]]`, "tpl/_partials/loop": `[[ render("_partials/loop", .) ]]`})
	s := build(t, t.TempDir(), map[string]any{"source": "tpl"})
	_, err := s.CheckApply(context.Background(), testEnv(dir), false)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("nested deeper than %d", MaxDepth)) {
		t.Fatalf("recursive render: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	outsideDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(outsideDir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := bundle(t, map[string]string{
		"jetbad/a":    "[[ if ]]",
		"gobad/a":     "{{ .data.port ",
		"runtime/a":   "[[ lookup(\"data.missing\") ]]",
		"escape/a":    `[[ render("../jetbad/a", .) ]]`,
		"write/a":     `[[ write("../x", "y") ]]`,
		"nopartial/a": `[[ render("_partials/none", .) ]]`,
	})
	if err := os.Symlink(outsideDir, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		props  map[string]any
		target string
		want   error
		text   string
	}{
		{"jet syntax error", map[string]any{"source": "jetbad"}, "", ErrRender, "a"},
		{"go syntax error", map[string]any{"source": "gobad", "engine": "go"}, "", ErrRender, "a"},
		{"missing key", map[string]any{"source": "runtime"}, "", ErrRender, "data.missing"},
		{"partial outside the source", map[string]any{"source": "escape"}, "", ErrSourceOutside, ""},
		{"write outside the target", map[string]any{"source": "write"}, "", ErrSourceOutside, ""},
		{"missing partial", map[string]any{"source": "nopartial"}, "", ErrRender, "no such template"},
		{"source outside the bundle", map[string]any{"source": "../"}, "", ErrSourceOutside, ""},
		{"source through a symlink out", map[string]any{"source": "linked"}, "", ErrSourceOutside, ""},
		{"absolute source elsewhere", map[string]any{"source": outsideDir}, "", ErrSourceOutside, ""},
		{"missing source", map[string]any{"source": "nope"}, "", nil, "no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target := filepath.Join(t.TempDir(), "t")
			s := build(t, target, tc.props)
			_, err := s.CheckApply(context.Background(), testEnv(dir), true)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v, want %v containing %q", err, tc.want, tc.text)
			}
			if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("target created on failure: %v", err)
			}
		})
	}
}

func TestSymlinksInTargetAreNotFollowed(t *testing.T) {
	t.Parallel()
	dir := bundle(t, map[string]string{"tpl/sub/f": "new", "tpl/g": "new"})
	outside := bundle(t, map[string]string{"f": "precious", "g": "precious"})

	// A link where a directory goes is an error.
	target := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(target, "sub")); err != nil {
		t.Fatal(err)
	}
	s := build(t, target, map[string]any{"source": "tpl"})
	if _, err := s.CheckApply(context.Background(), testEnv(dir), true); !errors.Is(err, ErrSymlink) {
		t.Fatalf("link on the path: %v", err)
	}
	// A target that is a link is an error.
	linked := filepath.Join(t.TempDir(), "t")
	if err := os.Symlink(outside, linked); err != nil {
		t.Fatal(err)
	}
	if _, err := build(t, linked, map[string]any{"source": "tpl"}).CheckApply(context.Background(), testEnv(dir), true); !errors.Is(err, ErrSymlink) {
		t.Fatalf("target is a link: %v", err)
	}
	// A link where a file goes is replaced by the file.
	target2 := t.TempDir()
	if err := os.Symlink(filepath.Join(outside, "g"), filepath.Join(target2, "g")); err != nil {
		t.Fatal(err)
	}
	res := checkApply(t, build(t, target2, map[string]any{"source": "tpl"}), testEnv(dir), true)
	if res.Diff != "+ sub/f\n~ g\n" {
		t.Fatalf("diff = %q", res.Diff)
	}
	fi, err := os.Lstat(filepath.Join(target2, "g"))
	if err != nil || !fi.Mode().IsRegular() || read(t, filepath.Join(target2, "g")) != "new" {
		t.Fatalf("link not replaced: %v %v", fi, err)
	}
	for _, f := range []string{"f", "g"} {
		if read(t, filepath.Join(outside, f)) != "precious" {
			t.Fatalf("%s outside the target was written", f)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		spec   resources.Spec
		reason string
	}{
		{"relative name", resources.Spec{Name: "etc/app", Properties: map[string]any{"source": "t"}}, "clean absolute path"},
		{"root", resources.Spec{Name: "/", Properties: map[string]any{"source": "t"}}, "root directory"},
		{"no source", resources.Spec{Name: "/etc/app"}, "source"},
		{"engine", resources.Spec{Name: "/etc/app", Properties: map[string]any{"source": "t", "engine": "erb"}}, "engine"},
		{"one delimiter", resources.Spec{Name: "/etc/app", Properties: map[string]any{"source": "t", "left_delimiter": "<<"}}, "both or neither"},
		{"bad glob", resources.Spec{Name: "/etc/app", Properties: map[string]any{"source": "t", "post": []any{map[string]any{"[": "x"}}}}, "post[0]"},
		{"ensure", resources.Spec{Name: "/etc/app", Ensure: "latest", Properties: map[string]any{"source": "t"}}, "ensure"},
		{"provider", resources.Spec{Name: "/etc/app", Provider: "other", Properties: map[string]any{"source": "t"}}, "provider"},
	}
	for _, tc := range cases {
		r, err := New(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(); err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.reason)
		}
	}
}

package scaffold

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

// bundle writes files (slash paths to contents) under a new directory and
// returns it.
func bundle(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func build(t *testing.T, target string, props map[string]any) *Scaffold {
	t.Helper()
	r, err := New(resources.Spec{Type: Type, Name: target, Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	return r.(*Scaffold)
}

func testEnv(dir string) *resources.Env {
	return &resources.Env{WorkDir: dir,
		Data:    map[string]any{"port": 8080, "name": "web"},
		Facts:   map[string]any{"hostname": "web01"},
		Environ: map[string]string{"TIER": "prod"}}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func checkApply(t *testing.T, s *Scaffold, env *resources.Env, apply bool) resources.Result {
	t.Helper()
	res, err := s.CheckApply(context.Background(), env, apply)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestJetEngineRendersTreeAndIsStable(t *testing.T) {
	t.Parallel()
	dir := bundle(t, map[string]string{
		"tpl/app.conf":              "[[ render(\"_partials/header\", .) ]]port=[[ data.port ]] host=[[ facts.hostname ]] tier=[[ Environ.TIER ]]\n",
		"tpl/sub/deep.txt":          "name=[[ lookup(\"data.name\") ]]\n",
		"tpl/_partials/header":      "# [[ data.name ]] managed\n",
		"tpl/sub/_partials/ignored": "never written",
	})
	target := filepath.Join(t.TempDir(), "app")
	s := build(t, target, map[string]any{"source": "tpl"})
	env := testEnv(dir)

	res := checkApply(t, s, env, true)
	if !res.Changed || res.Message != "write 2 files (app.conf, sub/deep.txt)" {
		t.Fatalf("first apply: %+v", res)
	}
	if got := read(t, filepath.Join(target, "app.conf")); got != "# web managed\nport=8080 host=web01 tier=prod\n" {
		t.Fatalf("app.conf = %q", got)
	}
	if got := read(t, filepath.Join(target, "sub/deep.txt")); got != "name=web\n" {
		t.Fatalf("deep.txt = %q", got)
	}
	for _, p := range []string{"_partials", "sub/_partials"} {
		if _, err := os.Lstat(filepath.Join(target, p)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s was written: %v", p, err)
		}
	}
	if res := checkApply(t, s, env, false); res.Changed {
		t.Fatalf("second check not stable: %+v", res)
	}
	if res := checkApply(t, s, env, true); res.Changed {
		t.Fatalf("second apply not stable: %+v", res)
	}
}

func TestGoEngineAndCustomDelimiters(t *testing.T) {
	t.Parallel()
	dir := bundle(t, map[string]string{
		"tpl/a.conf":           "{{ render \"_partials/h\" . }}port={{ .data.port }} host={{ .Facts.hostname }} {{ lookup \"data.name\" }}\n",
		"tpl/_partials/h":      "# {{ .data.name }}\n",
		"angle/b.conf":         "port=<< .data.port >> {{ untouched }}\n",
		"jetangle/c.conf":      "port=<< data.port >> [[ untouched ]]\n",
		"jetangle/_partials/x": "",
	})
	env := testEnv(dir)
	target := t.TempDir()
	checkApply(t, build(t, target, map[string]any{"source": "tpl", "engine": "go"}), env, true)
	if got := read(t, filepath.Join(target, "a.conf")); got != "# web\nport=8080 host=web01 web\n" {
		t.Fatalf("a.conf = %q", got)
	}
	checkApply(t, build(t, target, map[string]any{"source": "angle", "engine": "go", "left_delimiter": "<<", "right_delimiter": ">>"}), env, true)
	if got := read(t, filepath.Join(target, "b.conf")); got != "port=8080 {{ untouched }}\n" {
		t.Fatalf("b.conf = %q", got)
	}
	checkApply(t, build(t, target, map[string]any{"source": "jetangle", "left_delimiter": "<<", "right_delimiter": ">>"}), env, true)
	if got := read(t, filepath.Join(target, "c.conf")); got != "port=8080 [[ untouched ]]\n" {
		t.Fatalf("c.conf = %q", got)
	}
}

func TestSkipEmpty(t *testing.T) {
	t.Parallel()
	dir := bundle(t, map[string]string{
		"tpl/kept":  "x",
		"tpl/empty": "[[ if false ]]never[[ end ]]  \n",
	})
	target := t.TempDir()
	checkApply(t, build(t, target, map[string]any{"source": "tpl", "skip_empty": true}), testEnv(dir), true)
	if _, err := os.Lstat(filepath.Join(target, "empty")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty file written with skip_empty: %v", err)
	}
	checkApply(t, build(t, target, map[string]any{"source": "tpl"}), testEnv(dir), true)
	if got := read(t, filepath.Join(target, "empty")); got != "  \n" {
		t.Fatalf("without skip_empty: %q", got)
	}
}

func TestPurgeAndNoop(t *testing.T) {
	t.Parallel()
	dir := bundle(t, map[string]string{"tpl/keep.conf": "port=[[ data.port ]]\n"})
	target := bundle(t, map[string]string{"keep.conf": "old\n", "stale.conf": "x", "old/deep": "y"})
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(target, "link")); err != nil {
		t.Fatal(err)
	}
	env := testEnv(dir)

	// Without purge, extra files do not matter.
	keep := build(t, target, map[string]any{"source": "tpl"})
	res := checkApply(t, keep, env, false)
	if res.Message != "write 1 file (keep.conf)" || res.Diff != "~ keep.conf\n" {
		t.Fatalf("noop without purge: %+v", res)
	}
	if got := read(t, filepath.Join(target, "keep.conf")); got != "old\n" {
		t.Fatalf("noop wrote: %q", got)
	}

	s := build(t, target, map[string]any{"source": "tpl", "purge": true})
	res = checkApply(t, s, env, false)
	if want := "write 1 file (keep.conf), remove 3 files (link, old/deep, stale.conf)"; res.Message != want {
		t.Fatalf("noop message = %q, want %q", res.Message, want)
	}
	if want := "~ keep.conf\n- link\n- old/deep\n- stale.conf\n"; res.Diff != want {
		t.Fatalf("noop diff = %q, want %q", res.Diff, want)
	}
	if _, err := os.Lstat(filepath.Join(target, "stale.conf")); err != nil {
		t.Fatalf("noop removed a file: %v", err)
	}

	checkApply(t, s, env, true)
	for _, p := range []string{"stale.conf", "old/deep", "link"} {
		if _, err := os.Lstat(filepath.Join(target, p)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s not purged: %v", p, err)
		}
	}
	if got := read(t, outside); got != "precious" {
		t.Fatalf("purge followed the link: %q", got)
	}
	if got := read(t, filepath.Join(target, "keep.conf")); got != "port=8080\n" {
		t.Fatalf("keep.conf = %q", got)
	}
	if res := checkApply(t, s, env, false); res.Changed {
		t.Fatalf("not stable after purge: %+v", res)
	}
}

// recorder is a CommandRunner that records argv and runs nothing.
type recorder struct{ calls [][]string }

func (r *recorder) Run(_ context.Context, c resources.Command) (resources.CommandResult, error) {
	r.calls = append(r.calls, c.Argv)
	return resources.CommandResult{}, nil
}

func TestPostRunsOnlyForWrittenMatchingFiles(t *testing.T) {
	t.Parallel()
	dir := bundle(t, map[string]string{
		"tpl/run.sh":   "#!/bin/sh\necho [[ data.port ]]\n",
		"tpl/other.sh": "#!/bin/sh\n",
		"tpl/a.conf":   "x\n",
	})
	target := t.TempDir()
	if err := os.WriteFile(filepath.Join(target, "other.sh"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := build(t, target, map[string]any{"source": "tpl", "post": []any{
		map[string]any{"*.sh": "chmod +x {}"},
		map[string]any{"*.conf": "touch"},
	}})
	rec := &recorder{}
	env := testEnv(dir)
	env.Runner = rec
	checkApply(t, s, env, false)
	if len(rec.calls) != 0 {
		t.Fatalf("noop ran post commands: %v", rec.calls)
	}
	checkApply(t, s, env, true)
	want := [][]string{
		{"touch", filepath.Join(target, "a.conf")},
		{"chmod", "+x", filepath.Join(target, "run.sh")},
	}
	if len(rec.calls) != len(want) || strings.Join(rec.calls[0], " ") != strings.Join(want[0], " ") || strings.Join(rec.calls[1], " ") != strings.Join(want[1], " ") {
		t.Fatalf("post calls = %v, want %v (other.sh was unchanged)", rec.calls, want)
	}
	rec.calls = nil
	checkApply(t, s, env, true)
	if len(rec.calls) != 0 {
		t.Fatalf("stable apply ran post: %v", rec.calls)
	}
}

func TestPostRealCommandAndModeKept(t *testing.T) {
	t.Parallel()
	dir := bundle(t, map[string]string{"tpl/run.sh": "echo [[ data.port ]]\n"})
	target := t.TempDir()
	s := build(t, target, map[string]any{"source": "tpl", "post": []any{map[string]any{"*.sh": "chmod 0755 {}"}}})
	env := testEnv(dir)
	checkApply(t, s, env, true)
	fi, err := os.Stat(filepath.Join(target, "run.sh"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode after post: %v %v", fi, err)
	}
	// An update keeps the mode even without post.
	env.Data = map[string]any{"port": 9090}
	checkApply(t, build(t, target, map[string]any{"source": "tpl"}), env, true)
	fi, _ = os.Stat(filepath.Join(target, "run.sh"))
	if fi.Mode().Perm() != 0o755 || read(t, filepath.Join(target, "run.sh")) != "echo 9090\n" {
		t.Fatalf("update: mode %v content %q", fi.Mode(), read(t, filepath.Join(target, "run.sh")))
	}
	fail := build(t, target, map[string]any{"source": "tpl", "post": []any{map[string]any{"*.sh": "false"}}})
	env.Data = map[string]any{"port": 1}
	if _, err := fail.CheckApply(context.Background(), env, true); !errors.Is(err, ErrPost) {
		t.Fatalf("failing post: %v", err)
	}
}

func TestDataProperty(t *testing.T) {
	t.Parallel()
	dir := bundle(t, map[string]string{"tpl/f": "[[ data.app ]] [[ facts.hostname ]]"})
	target := t.TempDir()
	checkApply(t, build(t, target, map[string]any{"source": "tpl", "data": map[string]any{"app": "myapp"}}), testEnv(dir), true)
	if got := read(t, filepath.Join(target, "f")); got != "myapp web01" {
		t.Fatalf("f = %q", got)
	}
}

func TestWriteFunction(t *testing.T) {
	t.Parallel()
	dir := bundle(t, map[string]string{"tpl/main": "[[ write(\"extra/one.conf\", \"one\") ]]main"})
	target := t.TempDir()
	res := checkApply(t, build(t, target, map[string]any{"source": "tpl"}), testEnv(dir), true)
	if res.Message != "write 2 files (extra/one.conf, main)" || read(t, filepath.Join(target, "extra/one.conf")) != "one" {
		t.Fatalf("write(): %+v", res)
	}
}

func TestAbsent(t *testing.T) {
	t.Parallel()
	dir := bundle(t, map[string]string{"tpl/a": "a", "tpl/sub/b": "b"})
	parent := t.TempDir()
	target := filepath.Join(parent, "app")
	env := testEnv(dir)
	checkApply(t, build(t, target, map[string]any{"source": "tpl"}), env, true)
	if err := os.WriteFile(filepath.Join(target, "unrelated"), []byte("u"), 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := New(resources.Spec{Type: Type, Name: target, Ensure: "absent", Properties: map[string]any{"source": "tpl"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := abs.CheckApply(context.Background(), env, true)
	if err != nil || res.Message != "remove 2 files (a, sub/b)" {
		t.Fatalf("absent: %+v %v", res, err)
	}
	if _, err := os.Lstat(filepath.Join(target, "sub")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty sub left: %v", err)
	}
	if read(t, filepath.Join(target, "unrelated")) != "u" {
		t.Fatal("unrelated file removed")
	}
	if res, err := abs.CheckApply(context.Background(), env, false); err != nil || res.Changed {
		t.Fatalf("absent not stable: %+v %v", res, err)
	}
}

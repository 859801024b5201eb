package scaffold

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPostShellScriptHostileName: a post command that is a shell script
// ("sh -c '... {}'") gets the written file's path as a quoted positional
// parameter, so a template whose name holds "; touch PWNED" makes one
// file executable and runs nothing else.
func TestPostShellScriptHostileName(t *testing.T) {
	t.Parallel()
	const name = `a; touch PWNED; $(touch PWNED2).sh`
	dir := bundle(t, map[string]string{"tpl/" + name: "#!/bin/sh\n"})
	target := t.TempDir()
	s := build(t, target, map[string]any{"source": "tpl", "post": []any{map[string]any{"*.sh": "sh -c 'chmod 0755 {}'"}}})
	checkApply(t, s, testEnv(dir), true)
	entries, err := os.ReadDir(target)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{name}) {
		t.Fatalf("target holds %q, want only %q", names, name)
	}
	if fi, err := os.Stat(filepath.Join(target, name)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode after post: %v %v", fi, err)
	}
}

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAutoEdgesApply: with ordering: graph and no written require, a file
// and an exec declared before the directory they live in still run after
// it (automatic edges), `manifold render` shows the edges, a directory that
// fails skips what is inside it, and autoedge: false drops the edge.
func TestAutoEdgesApply(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml": `
ordering: graph
resources:
  - exec:
      - list: {command: "pwd > $D/out/app/pwd.txt", cwd: $D/out/app/conf, provider: shell}
  - file:
      - $D/out/app/conf/site.conf: {content: "x\n"}
      - $D/out/app/conf: {ensure: directory, mode: "0750"}
      - $D/out/app: {ensure: directory}
      - $D/out/blocker/sub/f: {content: "x\n"}
      - $D/out/blocker/sub: {ensure: directory}
      - $D/out/free: {content: "x\n", autoedge: false}
`,
		"out/blocker": "a regular file where a directory is wanted\n",
	})
	manifest := filepath.Join(dir, "manifest.yaml")
	out := dir + "/out"

	r := runWith(t, runOpts{}, "render", manifest)
	wantCode(t, r, 0)
	var rendered struct {
		Resources []struct {
			Type        string   `json:"type"`
			Name        string   `json:"name"`
			AutoRequire []string `json:"auto_require"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rendered); err != nil {
		t.Fatalf("render: %v\n%s", err, r)
	}
	auto := map[string]string{}
	for _, res := range rendered.Resources {
		auto[res.Type+"#"+res.Name] = strings.Join(res.AutoRequire, ",")
	}
	for ref, want := range map[string]string{
		"exec#list":                           "file#" + out + "/app/conf",
		"file#" + out + "/app/conf/site.conf": "file#" + out + "/app/conf",
		"file#" + out + "/app/conf":           "file#" + out + "/app",
		"file#" + out + "/app":                "",
		"file#" + out + "/blocker/sub/f":      "file#" + out + "/blocker/sub",
		"file#" + out + "/free":               "",
	} {
		if auto[ref] != want {
			t.Errorf("render: %s auto_require %q, want %q", ref, auto[ref], want)
		}
	}

	rep := apply(t, runOpts{}, 1, manifest)
	for ref, want := range map[string]string{
		"exec#list":                           "changed",
		"file#" + out + "/app/conf/site.conf": "changed",
		"file#" + out + "/app/conf":           "changed",
		"file#" + out + "/app":                "changed",
		"file#" + out + "/blocker/sub":        "failed",
		"file#" + out + "/blocker/sub/f":      "skipped",
		"file#" + out + "/free":               "changed",
	} {
		if got := rep.resource(t, ref).Status; got != want {
			t.Errorf("%s: want %s, got %s (%s)", ref, want, got, rep.resource(t, ref).Message)
		}
	}
	if got := readFile(t, out+"/app/pwd.txt"); got != out+"/app/conf\n" {
		t.Errorf("exec ran in %q", got)
	}
	fi, err := os.Stat(out + "/app/conf")
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("conf dir: %v %v", fi, err)
	}
	wantFile(t, out+"/app/conf/site.conf", "x\n", 0o644)
}

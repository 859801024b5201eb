package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// bombCUE is a few hundred bytes of CUE declaring a million resources.
const bombCUE = `import "list"

resources: [for a in list.Range(0, 100, 1) for b in list.Range(0, 100, 1) for c in list.Range(0, 100, 1) {
	type:    "file"
	name:    "/tmp/bomb/\(a)-\(b)-\(c)"
	content: "x"
}]
`

// TestCUEEvaluationBounded: a CUE manifest whose evaluation would pin a
// core for minutes is refused once its bound passes, by `manifold validate`
// and by a coordinator's manifests.validate, which then goes on answering.
// A small CUE manifest still validates.
func TestCUEEvaluationBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bomb := writeFile(t, dir, "bomb.cue", bombCUE)
	start := time.Now()
	r := runWith(t, runOpts{env: []string{"MANIFOLD_CUE_TIMEOUT=2s"}, timeout: 30 * time.Second}, "validate", bomb)
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "took longer than 2s") || !strings.Contains(r.stderr, "bomb.cue") {
		t.Fatalf("want the bound named:\n%s", r)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("validate took %s with a 2 s bound", took)
	}
	small := writeFile(t, dir, "small.cue", "import \"list\"\n\nresources: [for a in list.Range(0, 3, 1) {type: \"file\", name: \"/tmp/small-\\(a)\", content: \"x\"}]\n")
	r = runWith(t, runOpts{env: []string{"MANIFOLD_CUE_TIMEOUT=2s"}}, "validate", small)
	wantCode(t, r, 0)

	c := failStart(t, 1)
	c.coordinator(t, "coord-1")
	// The API answers once the server has its subscription.
	distEventually(t, 20*time.Second, "the coordinator's API answers", func() (bool, string) {
		_, err := c.nc.Request("manifold.api.runs.list", []byte(`{}`), 2*time.Second)
		return err == nil, fmt.Sprint(err)
	})
	var valid struct {
		Valid  bool     `json:"valid"`
		Errors []string `json:"errors"`
	}
	c.request(t, "manifold.api.manifests.validate", map[string]any{"manifest_yaml": bombCUE, "manifest_name": "bomb.cue"}, &valid)
	if valid.Valid || len(valid.Errors) == 0 || !strings.Contains(strings.Join(valid.Errors, "\n"), "took longer than") {
		t.Fatalf("manifests.validate of the bomb: %+v", valid)
	}
	valid.Valid, valid.Errors = false, nil
	c.request(t, "manifold.api.manifests.validate", map[string]any{"manifest_yaml": "resources:\n  - {type: file, name: /tmp/ok, content: ok}\n", "manifest_name": "ok.yaml"}, &valid)
	if !valid.Valid {
		t.Fatalf("the coordinator after the bomb: %+v", valid)
	}
}

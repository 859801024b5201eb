package e2e

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestHelloExample runs examples/hello as the README tells a new user to:
// apply, apply again, drift a file by hand, look with --noop, repair.
func TestHelloExample(t *testing.T) {
	t.Parallel()
	manifest := filepath.Join(moduleRoot, "examples", "hello", "manifest.yaml")
	dir := filepath.Join(t.TempDir(), "hello")
	o, tmp := isolatedTmp(t)
	dataDir := "dir=" + dir

	motd := filepath.Join(dir, "motd")
	conf := filepath.Join(dir, "app.conf")
	reloads := filepath.Join(dir, "reloads.log")
	refs := []string{"file#" + dir, "file#" + motd, "file#" + conf, "exec#reload"}
	const wantConf = "greeting = \"hello\"\nport = 8080\n"

	// First apply: everything is created, and the new app.conf refreshes
	// the subscribed reload exec.
	rep := apply(t, o, 0, "--data", dataDir, manifest)
	if rep.Status != "succeeded" || rep.Noop || rep.Depth != 0 {
		t.Fatalf("first apply: want succeeded, not noop, depth 0; got %+v", rep)
	}
	if want := (counts{Total: 4, Changed: 4}); rep.Counts != want {
		t.Errorf("first apply: want counts %+v, got %+v", want, rep.Counts)
	}
	var gotRefs []string
	for _, res := range rep.Resources {
		gotRefs = append(gotRefs, res.Ref)
		if res.Status != "changed" || res.Error != "" || res.Worker == "" || res.Noop {
			t.Errorf("first apply: %s: want changed by a worker without error, got %+v", res.Ref, res)
		}
	}
	if !slices.Equal(gotRefs, refs) {
		t.Errorf("report resources: want declaration order %v, got %v", refs, gotRefs)
	}
	if !rep.resource(t, "exec#reload").Refreshed {
		t.Errorf("exec#reload: want refreshed after app.conf was created")
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o755 {
		t.Errorf("%s: want a directory with mode 0755, got %s", dir, fi.Mode())
	}
	wantFile(t, motd, "hello from manifold\n", 0o644)
	wantFile(t, conf, wantConf, 0o644)
	if got := readFile(t, reloads); got != "reloaded\n" {
		t.Errorf("reloads.log after first apply: want one reload, got %q", got)
	}
	wantEmptyDir(t, tmp) // the embedded engine removed its store

	// Second apply: nothing to do, and no refresh.
	rep = apply(t, o, 0, "--data", dataDir, manifest)
	if want := (counts{Total: 4, Stable: 4}); rep.Counts != want {
		t.Errorf("second apply: want counts %+v, got %+v", want, rep.Counts)
	}
	for _, res := range rep.Resources {
		if res.Status != "stable" || res.Refreshed {
			t.Errorf("second apply: %s: want stable, not refreshed; got %+v", res.Ref, res)
		}
	}
	if got := readFile(t, reloads); got != "reloaded\n" {
		t.Errorf("reloads.log after second apply: want still one reload, got %q", got)
	}

	// Drift: someone edits app.conf by hand. --noop reports it (and the
	// refresh it would cause) and changes nothing.
	const drifted = "greeting = \"hi\"\nport = 1\n"
	if err := os.WriteFile(conf, []byte(drifted), 0o644); err != nil {
		t.Fatal(err)
	}
	rep = apply(t, o, 0, "--noop", "--data", dataDir, manifest)
	if !rep.Noop || rep.Status != "succeeded" {
		t.Fatalf("noop apply: want a succeeded noop run, got %+v", rep)
	}
	if want := (counts{Total: 4, Changed: 2, Stable: 2}); rep.Counts != want {
		t.Errorf("noop apply: want counts %+v, got %+v", want, rep.Counts)
	}
	wantStatuses := map[string]string{refs[0]: "stable", refs[1]: "stable", refs[2]: "changed", refs[3]: "changed"}
	if got := rep.statuses(); !maps.Equal(got, wantStatuses) {
		t.Errorf("noop apply: want statuses %v, got %v", wantStatuses, got)
	}
	for _, res := range rep.Resources {
		if !res.Noop {
			t.Errorf("noop apply: %s: want noop=true", res.Ref)
		}
	}
	if c := rep.resource(t, "file#"+conf); !strings.Contains(c.Message, "would") {
		t.Errorf("noop apply: app.conf: want a 'would ...' message, got %q", c.Message)
	}
	if r := rep.resource(t, "exec#reload"); !r.Refreshed || !strings.Contains(r.Message, "would") {
		t.Errorf("noop apply: exec#reload: want a would-run refresh, got %+v", r)
	}
	if got := readFile(t, conf); got != drifted {
		t.Errorf("noop apply changed app.conf: want %q, got %q", drifted, got)
	}
	if got := readFile(t, reloads); got != "reloaded\n" {
		t.Errorf("noop apply ran the reload: reloads.log is %q", got)
	}

	// The text output says the same to a human: the change by default,
	// the stable resources too with --verbose.
	r := runWith(t, o, "apply", "--noop", "--data", dataDir, manifest)
	wantCode(t, r, 0)
	if !containsLine(r.stdout, "would change", "file#"+conf) || containsLine(r.stdout, "stable", "file#"+motd) {
		t.Errorf("noop text output: want app.conf 'would change' and no line for the stable motd:\n%s", r)
	}
	r = runWith(t, o, "apply", "--noop", "--verbose", "--data", dataDir, manifest)
	wantCode(t, r, 0)
	if !containsLine(r.stdout, "would change", "file#"+conf) || !containsLine(r.stdout, "stable", "file#"+motd) {
		t.Errorf("noop --verbose text output: want app.conf 'would change' and motd 'stable':\n%s", r)
	}
	if got := readFile(t, conf); got != drifted {
		t.Errorf("noop text apply changed app.conf: got %q", got)
	}

	// A real apply repairs the drift and reloads once more.
	rep = apply(t, o, 0, "--data", dataDir, manifest)
	wantStatuses = map[string]string{refs[0]: "stable", refs[1]: "stable", refs[2]: "changed", refs[3]: "changed"}
	if got := rep.statuses(); !maps.Equal(got, wantStatuses) {
		t.Errorf("repair: want statuses %v, got %v", wantStatuses, got)
	}
	wantFile(t, conf, wantConf, 0o644)
	if got := readFile(t, reloads); got != "reloaded\nreloaded\n" {
		t.Errorf("reloads.log after repair: want two reloads, got %q", got)
	}
	wantEmptyDir(t, tmp)
}

// TestReportContract checks that the JSON report carries every field the
// README documents, with the documented JSON types, at both levels.
func TestReportContract(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := writeFile(t, dir, "m.yaml", `
resources:
  - file:
      - `+filepath.Join(dir, "out")+`:
          alias: out
          content: "x\n"
`)
	r := runWith(t, runOpts{dir: dir}, "apply", "--output", "json", m)
	wantCode(t, r, 0)
	var raw map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatalf("report is not a JSON object: %v\n%s", err, r)
	}
	top := map[string]string{
		"run_id": "string", "manifest": "string", "status": "string", "noop": "bool",
		"health_check_only": "bool", "depth": "number", "duration_ms": "number",
		"trace_id": "string", "counts": "object", "resources": "array",
	}
	wantFields(t, "report", raw, top)
	wantFields(t, "counts", raw["counts"].(map[string]any), map[string]string{
		"total": "number", "changed": "number", "stable": "number", "failed": "number", "skipped": "number",
	})
	resList := raw["resources"].([]any)
	if len(resList) != 1 {
		t.Fatalf("want one resource, got %d", len(resList))
	}
	res := resList[0].(map[string]any)
	wantFields(t, "resources[0]", res, map[string]string{
		"ref": "string", "type": "string", "name": "string", "alias": "string", "status": "string",
		"noop": "bool", "refreshed": "bool", "message": "string", "error": "string",
		"duration_ms": "number", "worker": "string", "child": "null",
	})
	if res["alias"] != "out" || res["type"] != "file" || res["ref"] != "file#"+filepath.Join(dir, "out") {
		t.Errorf("resources[0]: want file ref with alias out, got %v", res)
	}
	if id, _ := raw["trace_id"].(string); len(id) != 32 {
		t.Errorf("trace_id: want 32 hex digits, got %q", id)
	}
	if raw["manifest"] != m {
		t.Errorf("manifest: want %q, got %v", m, raw["manifest"])
	}
}

func wantFields(t *testing.T, where string, obj map[string]any, want map[string]string) {
	t.Helper()
	for k, typ := range want {
		v, ok := obj[k]
		if !ok {
			t.Errorf("%s: field %q missing", where, k)
			continue
		}
		if got := jsonType(v); got != typ {
			t.Errorf("%s.%s: want a JSON %s, got %s (%v)", where, k, typ, got, v)
		}
	}
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

// containsLine reports whether some line of s contains all of parts.
func containsLine(s string, parts ...string) bool {
	for line := range strings.Lines(s) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentApplies: two applies started at the same moment, sharing a
// TMPDIR, both succeed: the embedded engines share no port, store or lock.
func TestConcurrentApplies(t *testing.T) {
	t.Parallel()
	o, tmp := isolatedTmp(t)
	const procs, files = 2, 10
	var manifests []string
	for p := range procs {
		dir := t.TempDir()
		var b strings.Builder
		b.WriteString("resources:\n  - file:\n")
		for i := range files {
			fmt.Fprintf(&b, "      - %s: {content: \"%d-%d\\n\"}\n", filepath.Join(dir, fmt.Sprint(i)), p, i)
		}
		manifests = append(manifests, writeFile(t, dir, "m.yaml", b.String()))
	}

	results := make([]result, procs)
	errs := make([]error, procs)
	startLine := make(chan struct{})
	var wg sync.WaitGroup
	for p := range procs {
		wg.Go(func() {
			<-startLine
			results[p], errs[p] = execManifold(context.Background(), o, "apply", "--output", "json", manifests[p])
		})
	}
	close(startLine)
	wg.Wait()

	runIDs := map[string]bool{}
	for p := range procs {
		if errs[p] != nil {
			t.Fatal(errs[p])
		}
		wantCode(t, results[p], 0)
		rep := decodeReport(t, results[p])
		if rep.Counts.Changed != files {
			t.Errorf("apply %d: want %d changed, got %+v", p, files, rep.Counts)
		}
		runIDs[rep.RunID] = true
		for i := range files {
			wantFile(t, filepath.Join(filepath.Dir(manifests[p]), fmt.Sprint(i)), fmt.Sprintf("%d-%d\n", p, i), 0o644)
		}
	}
	if len(runIDs) != procs {
		t.Errorf("want %d distinct run IDs, got %v", procs, runIDs)
	}
	wantEmptyDir(t, tmp)
}

// TestHelp: help exits 0 and documents the commands and apply's flags.
func TestHelp(t *testing.T) {
	t.Parallel()
	r := run(t, "--help")
	wantCode(t, r, 0)
	for _, c := range []string{"apply", "validate", "render", "schema", "version", "Exit codes"} {
		if !strings.Contains(r.stdout, c) {
			t.Errorf("manifold --help: want %q on stdout:\n%s", c, r)
		}
	}
	if h := run(t, "help"); h.code != 0 || h.stdout != r.stdout {
		t.Errorf("manifold help: want the same as --help:\n%s", h)
	}

	for _, args := range [][]string{{"apply", "--help"}, {"help", "apply"}} {
		r := run(t, args...)
		wantCode(t, r, 0)
		out := r.stdout + r.stderr
		for _, f := range []string{"-noop", "-data", "-output", "-timeout", "-max-depth", "-concurrency",
			"-log-level", "-otlp-endpoint", "-health-check-only", "MANIFEST"} {
			if !strings.Contains(out, f) {
				t.Errorf("manifold %s: want %q in the help:\n%s", strings.Join(args, " "), f, r)
			}
		}
	}

	for _, args := range [][]string{{}, {"no-such-command"}, {"apply"}, {"apply", "--output", "yaml", "m.yaml"}, {"apply", "a.yaml", "b.yaml"}} {
		r := run(t, args...)
		wantCode(t, r, 2)
		if r.stderr == "" {
			t.Errorf("manifold %v: want an explanation on stderr", args)
		}
	}
}

// TestVersionSchemaRender covers the read-only commands.
func TestVersionSchemaRender(t *testing.T) {
	t.Parallel()
	r := run(t, "version")
	wantCode(t, r, 0)
	if !strings.HasPrefix(r.stdout, "manifold ") {
		t.Errorf("version: want 'manifold VERSION', got:\n%s", r)
	}

	r = run(t, "schema")
	wantCode(t, r, 0)
	for _, d := range []string{"#Manifest", "#Common", "#File", "#Exec"} {
		if !strings.Contains(r.stdout, d) {
			t.Errorf("schema: want %s in the output", d)
		}
	}
	r = run(t, "schema", "file")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "#File") || strings.Contains(r.stdout, "#Exec") {
		t.Errorf("schema file: want only file.cue:\n%s", r)
	}

	// render expands the block shape and renders names from data.
	dir := t.TempDir()
	manifest := filepath.Join(moduleRoot, "examples", "hello", "manifest.yaml")
	r = run(t, "render", "--data", "dir="+dir, manifest)
	wantCode(t, r, 0)
	var flat struct {
		Ordering  string `json:"ordering"`
		Resources []struct {
			Type    string   `json:"type"`
			Name    string   `json:"name"`
			Require []string `json:"require"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &flat); err != nil {
		t.Fatalf("render: not JSON: %v\n%s", err, r)
	}
	if flat.Ordering != "manifest" || len(flat.Resources) != 4 {
		t.Fatalf("render: want 4 resources in manifest order, got %+v", flat)
	}
	if res := flat.Resources[1]; res.Type != "file" || res.Name != dir+"/motd" || len(res.Require) != 1 || res.Require[0] != "file#"+dir {
		t.Errorf("render: want file %s/motd requiring file#%s (from defaults), got %+v", dir, dir, res)
	}
	wantAbsent(t, filepath.Join(dir, "motd")) // render applies nothing
}

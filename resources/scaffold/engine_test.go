package scaffold_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/scaffold"
	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// TestManifestThroughEngine takes a CCM-format manifest through the
// schema, the worker's rendering of properties and the engine: noop
// reports the files, apply writes them and the engine's re-check finds
// them stable, a second run changes nothing.
func TestManifestThroughEngine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for p, c := range map[string]string{
		"templates/app/_partials/logging.conf": "log_level = [[ data.log_level ]]\nlog_file = /var/log/myapp/[[ facts.hostname ]].log\n",
		"templates/app/myapp.conf":             "[[ render(\"_partials/logging.conf\", .) ]]\n[server]\nport = [[ data.port ]]\n",
		"templates/app/scripts/healthcheck.sh": "#!/bin/sh\ncurl -sf http://localhost:[[ data.port ]]/health || exit 1\n",
	} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	target := filepath.Join(t.TempDir(), "myapp")
	src := `resources:
  - scaffold:
      - ` + target + `:
          ensure: present
          source: templates/app
          purge: true
          post:
            - "*.sh": "chmod +x {}"
`
	m, err := schemas.Parse("manifest.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Resources) != 1 || m.Resources[0].Type != scaffold.Type {
		t.Fatalf("resources = %+v", m.Resources)
	}
	data := map[string]any{"port": 8080, "log_level": "info"}
	facts := map[string]any{"hostname": "web01"}
	spec, err := resources.RenderSpec(m.Resources[0], template.Scope{Data: data, Facts: facts, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	reg := resources.NewRegistry()
	reg.Register(scaffold.Type, scaffold.New)
	res, err := reg.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	env := func(noop bool) *resources.Env {
		return &resources.Env{Noop: noop, WorkDir: dir, Data: data, Facts: facts}
	}

	out := resources.Execute(context.Background(), res, env(true))
	if out.Err != nil || !out.Changed || !strings.Contains(out.Message, "myapp.conf, scripts/healthcheck.sh") {
		t.Fatalf("noop: %+v", out)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("noop created the target: %v", err)
	}

	out = resources.Execute(context.Background(), res, env(false))
	if out.Err != nil || out.Status != resources.StatusChanged {
		t.Fatalf("apply: %+v", out)
	}
	b, _ := os.ReadFile(filepath.Join(target, "myapp.conf"))
	if want := "log_level = info\nlog_file = /var/log/myapp/web01.log\n\n[server]\nport = 8080\n"; string(b) != want {
		t.Fatalf("myapp.conf = %q, want %q", b, want)
	}
	fi, err := os.Stat(filepath.Join(target, "scripts/healthcheck.sh"))
	if err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("post did not chmod: %v %v", fi, err)
	}

	out = resources.Execute(context.Background(), res, env(false))
	if out.Err != nil || out.Changed {
		t.Fatalf("second apply: %+v", out)
	}
}

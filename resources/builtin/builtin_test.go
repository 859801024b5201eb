package builtin

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

func TestRegistry(t *testing.T) {
	t.Parallel()
	if got := Registry().Types(); !slices.Equal(got, []string{"archive", "document", "exec", "file", "group", "http", "package", "scaffold", "service", "user"}) {
		t.Fatalf("Types() = %v", got)
	}
}

// TestManifestResourceToOutcome walks one resource the way a worker does:
// render, build, execute.
func TestManifestResourceToOutcome(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.conf")
	r := schemas.Resource{Type: "file", Name: path, Properties: map[string]any{
		"content": "port={{ lookup('data.port') }}\n",
		"mode":    "0600",
	}}
	spec, err := resources.RenderSpec(r, template.Scope{Data: map[string]any{"port": 8080}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Registry().New(spec)
	if err != nil {
		t.Fatal(err)
	}
	out := resources.Execute(context.Background(), res, &resources.Env{})
	if out.Status != resources.StatusChanged {
		t.Fatalf("outcome %+v", out)
	}
	if b, _ := os.ReadFile(path); string(b) != "port=8080\n" {
		t.Fatalf("content %q", b)
	}
}

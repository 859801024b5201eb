package document_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// TestFromManifest walks document resources the way a worker does: parse
// and validate the manifest (CUE), render, build, execute.
func TestFromManifest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := strings.ReplaceAll(`
data: {port: 8080}
resources:
  - document:
      - DIR/config.json:
          content: {log: {level: info}, listeners: [{port: "{{ lookup('data.port') }}", protocol: tcp}]}
          merge_keys: {listeners: [port, protocol]}
          mode: "0600"
  - type: document
    name: DIR/app.yaml
    content: |
      server:
        port: {{ lookup('data.port') }}
    atomic: [server]
`, "DIR", dir)
	m, err := schemas.Parse("site.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	reg := builtin.RegistryWith(builtin.Config{})
	for _, r := range m.Resources {
		spec, err := resources.RenderSpec(r, template.Scope{Data: m.Data})
		if err != nil {
			t.Fatal(err)
		}
		res, err := reg.New(spec)
		if err != nil {
			t.Fatal(err)
		}
		out := resources.Execute(context.Background(), res, &resources.Env{State: &memStore{}})
		if out.Status != resources.StatusChanged {
			t.Fatalf("%s: %+v", spec.Ref(), out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "config.json")); !strings.Contains(string(b), `"port": 8080`) {
		t.Fatalf("config.json:\n%s", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "app.yaml")); string(b) != "server:\n  port: 8080\n" {
		t.Fatalf("app.yaml:\n%s", b)
	}
}

func TestManifestErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ src, want string }{
		{"resources:\n  - document:\n      - /etc/a.json: {format: json}\n", "content: field is required"},
		{"resources:\n  - document:\n      - /etc/a.json: {content: {}, format: toml}\n", "format"},
		{"resources:\n  - document:\n      - /etc/a.json: {content: {}, merge_keys: {l: []}}\n", "merge_keys.l"},
		{"resources:\n  - document:\n      - /etc/a.json: {content: 3}\n", "content"},
	} {
		_, err := schemas.Parse("m.yaml", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "m.yaml:3:") {
			t.Errorf("%s: err %v, want m.yaml:3: ... %q", tc.src, err, tc.want)
		}
	}
}

// memStore is a resources.StateStore in memory, as a host's store is seen.
type memStore struct{ m map[string][]byte }

func (s *memStore) Get(_ context.Context, key string) ([]byte, bool, error) {
	v, ok := s.m[key]
	return v, ok, nil
}

func (s *memStore) Put(_ context.Context, key string, val []byte) error {
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[key] = val
	return nil
}

func (s *memStore) Delete(_ context.Context, key string) error {
	delete(s.m, key)
	return nil
}

var _ resources.StateStore = (*memStore)(nil)

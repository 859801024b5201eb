package document_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/conformance"
	"github.com/manifold-run/manifold/resources/document"
)

func TestConformanceFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, existing string }{
		{"new.json", ""},
		{"shared.json", `{"theirs": [1, 2], "log": {"level": "debug", "file": "x"}}`},
		{"shared.yaml", "# kept\ntheirs: 1\nlog:\n  level: debug # was\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, tc.name)
			if tc.existing != "" {
				if err := os.WriteFile(path, []byte(tc.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			state := &document.FileStore{Dir: t.TempDir(), Host: "h"}
			conformance.Run(t, conformance.Case{
				New: func(t *testing.T) (resources.Resource, *resources.Env) {
					res, err := document.New(resources.Spec{Type: document.Type, Name: path, Properties: map[string]any{
						"content": map[string]any{"log": map[string]any{"level": "info"}, "listeners": []any{map[string]any{"port": 80}}},
						"mode":    "0640",
					}})
					if err != nil {
						t.Fatal(err)
					}
					return res, &resources.Env{State: state}
				},
				Snapshot: func(t *testing.T) string {
					b, err := os.ReadFile(path)
					if os.IsNotExist(err) {
						return "absent"
					}
					if err != nil {
						t.Fatal(err)
					}
					fi, _ := os.Stat(path)
					rec, _, _ := state.Get(context.Background(), document.Type+"#"+path)
					return fmt.Sprintf("%v %q last-applied %s", fi.Mode(), b, rec)
				},
			})
		})
	}
}

func TestConformanceKV(t *testing.T) {
	t.Parallel()
	k := setupKV(t)
	if err := k.otherWriter(context.Background(), "theirs", 1); err != nil {
		t.Fatal(err)
	}
	conformance.Run(t, conformance.Case{
		New: func(t *testing.T) (resources.Resource, *resources.Env) {
			res, err := document.NewFactory(document.Config{Buckets: k.buckets(nil)})(resources.Spec{
				Type: document.Type, Name: "kv://apps/web.config", Properties: map[string]any{
					"content": "replicas: 3\nenv:\n  MODE: prod\n", "format": "yaml"}})
			if err != nil {
				t.Fatal(err)
			}
			return res, &resources.Env{State: k.store}
		},
		Snapshot: func(t *testing.T) string {
			raw, rev, found, err := k.entry.Get(context.Background(), "web.config")
			if err != nil {
				t.Fatal(err)
			}
			rec, _, _ := k.store.Get(context.Background(), "document#kv://apps/web.config")
			return fmt.Sprintf("%v rev %d %q last-applied %s", found, rev, raw, rec)
		},
	})
}

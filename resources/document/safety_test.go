package document

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/conformance"
)

func TestConformanceLinks(t *testing.T) {
	t.Parallel()
	conformance.RunLinks(t, conformance.WriteCase{
		New: func(t *testing.T, path string) (resources.Resource, *resources.Env) {
			res, err := New(resources.Spec{Type: Type, Name: path, Properties: map[string]any{
				"content": map[string]any{"port": 1}, "mode": "0644"}})
			if err != nil {
				t.Fatal(err)
			}
			return res, &resources.Env{State: &FileStore{Dir: t.TempDir(), Host: "h"}}
		},
		LinkAtPath: conformance.LinkRefused,
	})
}

// TestDiffHidden: values are shown only when an unprivileged user could
// read the document: world-readable, in directories all can search.
func TestDiffHidden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		mode    os.FileMode
		dirMode os.FileMode
		props   map[string]any
		shown   bool
	}{
		{"0644 in 0755", 0o644, 0o755, nil, true},
		{"0600 in 0755", 0o600, 0o755, nil, false},
		{"0644 in 0700", 0o644, 0o700, nil, false},
		{"0644 made 0600", 0o644, 0o755, map[string]any{"mode": "0600"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(publicDir(t), "d")
			if err := os.Mkdir(dir, tc.dirMode); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "daemon.json")
			if err := os.WriteFile(path, []byte(`{"token": "hunter2", "level": "debug"}`), tc.mode); err != nil {
				t.Fatal(err)
			}
			props := map[string]any{"content": map[string]any{"token": "s3cret", "level": "info"}}
			for k, v := range tc.props {
				props[k] = v
			}
			res, err := New(resources.Spec{Type: Type, Name: path, Properties: props})
			if err != nil {
				t.Fatal(err)
			}
			for _, noop := range []bool{true, false} {
				out := resources.Execute(context.Background(), res, &resources.Env{Noop: noop, State: &FileStore{Dir: t.TempDir(), Host: "h"}})
				if out.Status != resources.StatusChanged || !strings.Contains(out.Message, "2 fields") {
					t.Fatalf("noop %v: %+v", noop, out)
				}
				all := out.Message + out.Diff
				if shown := strings.Contains(all, "hunter2"); shown != tc.shown {
					t.Fatalf("noop %v: old value shown %v, want %v: %+v", noop, shown, tc.shown, out)
				}
				if !tc.shown && (strings.Contains(all, "s3cret") || !strings.Contains(out.Diff, "diff hidden: "+path+" is not readable by other users")) {
					t.Fatalf("noop %v: diff %q", noop, out.Diff)
				}
			}
		})
	}
}

// TestConcurrentWriters: two writers of one document, each adding its own
// key, many rounds at once: every key of both survives (a read-merge-write
// racing another loses the other's key without the lock).
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared.json")
	if err := os.WriteFile(path, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const rounds = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds)
	for w := range 2 {
		state := &FileStore{Dir: t.TempDir(), Host: fmt.Sprintf("writer%d", w)}
		wg.Go(func() {
			for r := range rounds {
				key := fmt.Sprintf("w%d_%02d", w, r)
				res, err := New(resources.Spec{Type: Type, Name: path, Properties: map[string]any{
					"content": map[string]any{key: r}}})
				if err != nil {
					errs <- err
					return
				}
				// Each round is its own resource: its last-applied record
				// (another key) never deletes the keys of earlier rounds.
				out := resources.Execute(context.Background(), res, &resources.Env{State: &FileStore{Dir: filepath.Join(state.Dir, key), Host: state.Host}})
				if out.Err != nil {
					errs <- fmt.Errorf("%s: %w", key, out.Err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	var lost []string
	for w := range 2 {
		for r := range rounds {
			if key := fmt.Sprintf("w%d_%02d", w, r); got[key] == nil {
				lost = append(lost, key)
			}
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d updates lost: %v", len(lost), 2*rounds, lost)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if e.Name() != "shared.json" && e.Name() != ".shared.json.manifold-lock" {
			t.Errorf("left in the directory: %s", e.Name())
		}
	}
}

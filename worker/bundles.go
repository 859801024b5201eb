package worker

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bundle"
)

// bundleDirs extracts bundles for tasks that carry no local work
// directory: the worker works in the entry manifest's directory of the
// extracted bundle, so relative paths (file sources, exec cwd) resolve as
// they did on the submitting host.
type bundleDirs struct {
	mu    sync.Mutex
	ready map[string]string // bundle name → extracted directory
}

// workDir returns the directory a task works in and a cleanup func.
func (w *Worker) workDir(ctx context.Context, task bus.Task) (string, func(), error) {
	nothing := func() {}
	if task.WorkDir != "" || task.Bundle == "" {
		return task.WorkDir, nothing, nil
	}
	sub := filepath.FromSlash(path.Dir(task.Entry))
	if strings.HasPrefix(task.Bundle, bus.BundleScheme) {
		// obj:// keys may be overwritten: extract afresh for this task.
		dir, err := os.MkdirTemp("", "manifold-bundle-")
		if err != nil {
			return "", nothing, err
		}
		cleanup := func() { os.RemoveAll(dir) }
		if err := w.extract(ctx, task.Bundle, dir); err != nil {
			cleanup()
			return "", nothing, err
		}
		return filepath.Join(dir, sub), cleanup, nil
	}
	w.bundles.mu.Lock()
	defer w.bundles.mu.Unlock()
	if dir, ok := w.bundles.ready[task.Bundle]; ok {
		return filepath.Join(dir, sub), nothing, nil
	}
	dir := filepath.Join(w.cfg.CacheDir, "bundles", task.Bundle)
	if _, err := os.Stat(dir); err != nil {
		// Workers sharing a cache directory may extract the same bundle at
		// once: each into its own temporary directory, and the first
		// rename wins (bundles are immutable, so any copy will do).
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return "", nothing, err
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), task.Bundle+".tmp-")
		if err != nil {
			return "", nothing, err
		}
		defer os.RemoveAll(tmp)
		if err := w.extract(ctx, task.Bundle, tmp); err != nil {
			return "", nothing, err
		}
		if err := os.Rename(tmp, dir); err != nil {
			if _, serr := os.Stat(dir); serr != nil {
				return "", nothing, fmt.Errorf("bundle %s: %w", task.Bundle, err)
			}
		}
	}
	if w.bundles.ready == nil {
		w.bundles.ready = map[string]string{}
	}
	w.bundles.ready[task.Bundle] = dir
	return filepath.Join(dir, sub), nothing, nil
}

func (w *Worker) extract(ctx context.Context, ref, dir string) error {
	data, err := w.bus.GetBundle(ctx, ref)
	if err != nil {
		return err
	}
	b, err := bundle.Open(data)
	if err != nil {
		return fmt.Errorf("bundle %s: %w", ref, err)
	}
	for _, name := range b.Names() {
		content, _ := b.Read(name)
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			return err
		}
	}
	return os.MkdirAll(dir, 0o755)
}

package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/compile"
)

// uploadBundle stores the bundle of a compiled manifest tree (the entry
// manifest, its child manifests and the files they reference) in the
// object store and fills req's Bundle, Entry and ManifestName. With local
// set, WorkDir is the bundle root on this host (embedded mode: workers
// share the filesystem).
func uploadBundle(ctx context.Context, b *bus.Bus, req *bus.RunRequest, path string, t *compile.Tree, local bool) error {
	archive, err := t.Bundle.Archive()
	if err != nil {
		return fmt.Errorf("bundle %s: %w", path, err)
	}
	name, err := b.PutBundle(ctx, archive)
	if err != nil {
		return err
	}
	req.Bundle, req.Entry, req.ManifestName = name, t.Entry, path
	if local {
		if req.WorkDir, err = filepath.Abs(filepath.Dir(path)); err != nil {
			return err
		}
	}
	return nil
}

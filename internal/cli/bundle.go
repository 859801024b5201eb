package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bundle"
)

// uploadBundle bundles the manifest at path with the files it references
// (child manifests, file sources), stores the bundle in the object store
// and fills req's Bundle, Entry and ManifestName. With local set, WorkDir
// is the bundle root on this host (embedded mode: workers share the
// filesystem).
func uploadBundle(ctx context.Context, b *bus.Bus, req *bus.RunRequest, path string, local bool) error {
	bnd, entry, err := bundle.Build(path, req.Data)
	if err != nil {
		return fmt.Errorf("bundle %s: %w", path, err)
	}
	archive, err := bnd.Archive()
	if err != nil {
		return fmt.Errorf("bundle %s: %w", path, err)
	}
	name, err := b.PutBundle(ctx, archive)
	if err != nil {
		return err
	}
	req.Bundle, req.Entry, req.ManifestName = name, entry, path
	if local {
		if req.WorkDir, err = filepath.Abs(filepath.Dir(path)); err != nil {
			return err
		}
	}
	return nil
}

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/compile"
)

// maxInlineData is the largest run data (JSON) the run request carries
// itself; larger data travels in the bundle (RunRequest.DataFile), so data
// files up to MaxDataFileBytes never meet the server's maximum payload
// (1 MiB by default).
const maxInlineData = 64 << 10

// runDataFile is where the bundle holds run data too large for the
// request.
const runDataFile = ".manifold/run-data.json"

// uploadBundle stores the bundle of a compiled manifest tree (the entry
// manifest, its child manifests and the files they reference) in the
// object store and fills req's Bundle, Entry and ManifestName. Run data
// over maxInlineData goes into the bundle (req.DataFile). With local
// set, WorkDir is the bundle root on this host (embedded mode: workers
// share the filesystem).
func uploadBundle(ctx context.Context, b *bus.Bus, req *bus.RunRequest, path string, t *compile.Tree, local bool) error {
	archive, err := packBundle(req, path, t, local)
	if err != nil {
		return err
	}
	return putBundle(ctx, b, req, archive)
}

// packBundle is uploadBundle's part that needs no bus: it returns the
// bundle's archive and fills every field of req but Bundle (putBundle
// does). The embedded apply packs while its engine starts.
func packBundle(req *bus.RunRequest, path string, t *compile.Tree, local bool) ([]byte, error) {
	if len(req.Data) > 0 {
		data, err := json.Marshal(req.Data)
		if err != nil {
			return nil, fmt.Errorf("run data: %w", err)
		}
		if len(data) > maxInlineData {
			if _, err := t.Bundle.Read(runDataFile); err == nil {
				return nil, fmt.Errorf("bundle %s: %s is reserved for the run's data", path, runDataFile)
			}
			if err := t.Bundle.Add(runDataFile, data); err != nil {
				return nil, fmt.Errorf("bundle %s: run data: %w", path, err)
			}
			req.Data, req.DataFile = nil, runDataFile
		}
	}
	archive, err := t.Bundle.Archive()
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	req.Entry, req.ManifestName = t.Entry, path
	if local {
		if req.WorkDir, err = filepath.Abs(filepath.Dir(path)); err != nil {
			return nil, err
		}
	}
	return archive, nil
}

// putBundle stores a packed bundle and names it in req.Bundle.
func putBundle(ctx context.Context, b *bus.Bus, req *bus.RunRequest, archive []byte) error {
	name, err := b.PutBundle(ctx, archive)
	if err != nil {
		return err
	}
	req.Bundle = name
	return nil
}

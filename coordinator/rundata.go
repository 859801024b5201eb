package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bundle"
)

// runData returns a run request's data: Data, or the JSON map in its
// bundle that DataFile names (data too large for a message travels
// there). b is the request's bundle, nil when it has none.
func runData(req bus.RunRequest, b *bundle.Bundle) (map[string]any, error) {
	if req.DataFile == "" {
		return req.Data, nil
	}
	if req.Data != nil {
		return nil, errors.New("run request: data and data_file exclude each other")
	}
	if b == nil {
		return nil, fmt.Errorf("run request: data_file %q needs a bundle to be in", req.DataFile)
	}
	src, err := b.Read(req.DataFile)
	if err != nil {
		return nil, fmt.Errorf("run request: data_file: bundle %s: %w", req.Bundle, err)
	}
	var data map[string]any
	if err := json.Unmarshal(src, &data); err != nil {
		return nil, fmt.Errorf("run request: data_file %s: want a JSON map: %w", req.DataFile, err)
	}
	return data, nil
}

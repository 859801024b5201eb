package coordinator

import (
	"context"
	"fmt"
	"sync"

	"github.com/manifold-run/manifold/internal/bundle"
)

// bundleCacheSize bounds the bundles kept in memory; bundles are immutable
// (named by digest), so a cached one never goes stale. obj:// bundles are
// not cached: their key may be overwritten.
const bundleCacheSize = 16

type bundleCache struct {
	mu    sync.Mutex
	items map[string]*bundle.Bundle
	order []string
}

// bundle returns the opened bundle ref, from the cache or the bus.
func (c *Coordinator) bundle(ctx context.Context, ref string) (*bundle.Bundle, error) {
	c.bundles.mu.Lock()
	if b, ok := c.bundles.items[ref]; ok {
		c.bundles.mu.Unlock()
		return b, nil
	}
	c.bundles.mu.Unlock()
	data, err := c.bus.GetBundle(ctx, ref)
	if err != nil {
		return nil, err
	}
	b, err := bundle.Open(data)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", ref, err)
	}
	if len(ref) > 6 && ref[:6] == "obj://" {
		return b, nil
	}
	c.bundles.mu.Lock()
	defer c.bundles.mu.Unlock()
	if c.bundles.items == nil {
		c.bundles.items = map[string]*bundle.Bundle{}
	}
	if _, ok := c.bundles.items[ref]; !ok {
		c.bundles.items[ref] = b
		c.bundles.order = append(c.bundles.order, ref)
		if len(c.bundles.order) > bundleCacheSize {
			delete(c.bundles.items, c.bundles.order[0])
			c.bundles.order = c.bundles.order[1:]
		}
	}
	return b, nil
}

package schemas

import (
	"crypto/sha256"
	"slices"
	"sync"
)

// parseCacheSize bounds the manifests a process keeps parsed. One apply
// parses its manifest in the CLI, the bundle builder and the coordinator:
// the CUE work is done once.
const parseCacheSize = 8

// parseCache remembers the results of ParseUnchecked by file name and
// content; results are cloned on the way out, since callers render names
// and references in place.
var parseCache struct {
	mu    sync.Mutex
	items map[[32]byte]parsed
	order [][32]byte
}

type parsed struct {
	m   *Manifest
	err error
}

func parseKey(filename string, src []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte(filename))
	h.Write([]byte{0})
	h.Write(src)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func cachedParse(key [32]byte) (*Manifest, error, bool) {
	parseCache.mu.Lock()
	defer parseCache.mu.Unlock()
	p, ok := parseCache.items[key]
	if !ok {
		return nil, nil, false
	}
	if p.err != nil {
		return nil, p.err, true
	}
	return p.m.clone(), nil, true
}

func storeParse(key [32]byte, m *Manifest, err error) {
	parseCache.mu.Lock()
	defer parseCache.mu.Unlock()
	if parseCache.items == nil {
		parseCache.items = map[[32]byte]parsed{}
	}
	if _, ok := parseCache.items[key]; ok {
		return
	}
	if m != nil {
		m = m.clone()
	}
	parseCache.items[key] = parsed{m: m, err: err}
	parseCache.order = append(parseCache.order, key)
	if len(parseCache.order) > parseCacheSize {
		delete(parseCache.items, parseCache.order[0])
		parseCache.order = parseCache.order[1:]
	}
}

// clone copies what callers modify in place: the resource list and each
// resource's strings and reference lists (names, aliases and references
// are rendered from data). Property maps are shared: nobody writes them.
func (m *Manifest) clone() *Manifest {
	c := *m
	c.Resources = slices.Clone(m.Resources)
	for i := range c.Resources {
		r := &c.Resources[i]
		r.Require = slices.Clone(r.Require)
		r.Subscribe = slices.Clone(r.Subscribe)
	}
	return &c
}

package compile

import (
	"testing"

	"github.com/manifold-run/manifold/schemas"
)

// TestRefIndexIsLookup requires refIndex to resolve every reference as
// schemas.Manifest.Lookup does: a name before an alias, the first of each,
// names with '#' in them, unknown types and names. ("file#", which Lookup
// resolves to the first file without an alias, never reaches the graph:
// CheckReferences refuses a reference without a name.)
func TestRefIndexIsLookup(t *testing.T) {
	t.Parallel()
	m := &schemas.Manifest{Resources: []schemas.Resource{
		{Type: "file", Name: "/a"},
		{Type: "file", Name: "/b", Alias: "/a"},
		{Type: "file", Name: "/c", Alias: "conf"},
		{Type: "exec", Name: "conf", Alias: "x"},
		{Type: "file", Name: "/d", Alias: "conf"},
		{Type: "file", Name: "/a"},
		{Type: "exec", Name: "run#1"},
		{Type: "exec", Name: "y", Alias: "/c"},
	}}
	x := newRefIndex(m)
	for _, ref := range []string{
		"file#/a", "file#/b", "file#conf", "exec#conf", "exec#x", "file#/d", "exec#run#1",
		"exec#/c", "file#/c", "file#x", "exec#/a", "package#/a", "#/a", "file/a", "", "exec#run",
	} {
		wi, wok := m.Lookup(ref)
		gi, gok := x.lookup(ref)
		if wi != gi || wok != gok {
			t.Errorf("lookup(%q) = %d, %v; Manifest.Lookup = %d, %v", ref, gi, gok, wi, wok)
		}
	}
}

// TestGraphOfRequireChain builds the graph of 5,000 files each requiring
// the one before it: every edge is found, in a bounded number of
// allocations. (The graph resolved each reference by scanning every
// resource, 12.5 million comparisons here; refIndex looks each up once.)
func TestGraphOfRequireChain(t *testing.T) {
	const n = 5000
	m := &schemas.Manifest{Ordering: schemas.OrderingGraph, Resources: make([]schemas.Resource, n)}
	for i := range n {
		r := &m.Resources[i]
		r.Type, r.Name = "file", fileName(i)
		if i > 0 {
			r.Require = []string{"file#" + fileName(i-1)}
		}
	}
	allocs := testing.AllocsPerRun(1, func() {
		p := graph(m, nil)
		for i := 1; i < n; i++ {
			if len(p.Requires[i]) != 1 || p.Requires[i][0] != i-1 {
				t.Fatalf("resource %d requires %v, want [%d]", i, p.Requires[i], i-1)
			}
		}
	})
	if allocs > 4*n {
		t.Errorf("graph of %d resources: %.0f allocations, want at most %d", n, allocs, 4*n)
	}
}

func fileName(i int) string {
	return "/srv/f" + string(rune('a'+i%26)) + "/" + itoa(i)
}

func itoa(i int) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		if i /= 10; i == 0 {
			return string(b)
		}
	}
}

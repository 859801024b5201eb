package compile

import (
	"testing"
)

// maxAllocsPerResource bounds the allocations of validate's compile of
// e2e/bench's manifest, per resource (parse, names, references, templates,
// properties, graph; benchmark text included). It was 57 before the template memo, the inline-check
// cache, the allocation-free automatic-edge lookup and ParseOnce; it is
// 42 now.
const maxAllocsPerResource = 45

// TestValidateAllocationsPerResource compiles e2e/bench's manifest of
// 2,000 files as `manifold validate` does and bounds its allocations.
func TestValidateAllocationsPerResource(t *testing.T) {
	const n = 2000
	salt := 1 << 20
	allocs := testing.AllocsPerRun(3, func() {
		salt++
		p, err := Source("m.yaml", benchManifest(n, salt), Opts{ParseOnce: true})
		if err != nil || len(p.Manifest.Resources) != n+1 {
			t.Fatal(err)
		}
	})
	// benchManifest's own text: a builder and two Fprintf per file.
	per := allocs / (n + 1)
	t.Logf("%.0f allocations, %.1f per resource (benchManifest's text included)", allocs, per)
	if per > maxAllocsPerResource {
		t.Errorf("%.1f allocations per resource, want at most %d", per, maxAllocsPerResource)
	}
}

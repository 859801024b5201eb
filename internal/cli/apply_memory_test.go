package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/schemas"
)

// TestApplyDoesNotKeepTheParse: apply parses its manifest once and keeps
// no copy of it in the schemas' parse cache (the embedded coordinator runs
// the plan the CLI compiled): a parse of the same text afterwards is a
// real parse, not the cache's copy. Before, the cache held every resource
// of the manifest for the rest of the process (6 MB at 20,000 files).
func TestApplyDoesNotKeepTheParse(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\nresources:\n  - file:\n", dir) // a text no other test parses
	const n = 50
	for i := range n {
		fmt.Fprintf(&b, "      - %s: {ensure: present, content: \"%d\\n\"}\n", filepath.Join(dir, fmt.Sprintf("f%d", i)), i)
	}
	manifest := filepath.Join(dir, "m.yaml")
	src := []byte(b.String())
	require.NoError(t, os.WriteFile(manifest, src, 0o644))

	code, out, errOut := runCLI(t, "apply", manifest)
	require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	got, err := os.ReadFile(filepath.Join(dir, "f7"))
	require.NoError(t, err)
	require.Equal(t, "7\n", string(got))

	// A cached manifest is handed out as a copy of its resources list: a
	// few allocations. A parse makes several per resource.
	allocs := testing.AllocsPerRun(3, func() {
		m, err := schemas.ParseOnce(manifest, src)
		if err != nil || len(m.Resources) != n {
			panic(fmt.Sprint(err))
		}
	})
	require.Greater(t, allocs, float64(2*n), "the parse of %s was in the cache after apply: %v allocations", manifest, allocs)

	// The check itself tells a cached parse from a real one.
	_, err = schemas.ParseUnchecked(manifest, src)
	require.NoError(t, err)
	cached := testing.AllocsPerRun(3, func() { _, _ = schemas.ParseOnce(manifest, src) })
	require.Less(t, cached, float64(n), "a cached parse made %v allocations", cached)
}

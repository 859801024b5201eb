package cli

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// CCM's single-resource shape ({package: {name: sl, ensure: "5.9"}})
// validates and renders as the one resource it declares.
func TestValidateSingleResourceShape(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"m.yaml": "resources:\n  - package: {name: sl, ensure: \"5.9\"}\n"})
	r := run(t, "validate", filepath.Join(dir, "m.yaml"), "--facts-dir", dir)
	require.Equal(t, result{ExitOK, filepath.Join(dir, "m.yaml") + ": valid, 1 resource\n", ""}, r)
	r = run(t, "render", filepath.Join(dir, "m.yaml"), "--facts-dir", dir)
	require.Equal(t, ExitOK, r.code, "%+v", r)
	require.Contains(t, r.stdout, `"type": "package"`)
	require.Contains(t, r.stdout, `"name": "sl"`)
	require.Contains(t, r.stdout, `"ensure": "5.9"`)
}

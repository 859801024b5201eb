package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A run tree starts at most --max-tree-runs child runs: the apply
// resources past the limit fail with an error naming it, the others run.
func TestApplyTreeRunsLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{}
	var m strings.Builder
	m.WriteString("ordering: graph\nresources:\n  - apply:\n")
	for i := range 5 {
		fmt.Fprintf(&m, "      - c%d/manifest.yaml: {}\n", i)
		files[fmt.Sprintf("c%d/manifest.yaml", i)] = fmt.Sprintf("resources:\n  - file:\n      - $D/out%d.txt: {content: x}\n", i)
	}
	files["manifest.yaml"] = m.String()
	writeFiles(t, dir, files)

	r := run(t, "apply", "--output", "json", "--max-tree-runs", "3", "--facts-dir", dir, filepath.Join(dir, "manifest.yaml"))
	require.Equal(t, ExitFailed, r.code, "%+v", r)
	var rep struct {
		Status    string `json:"status"`
		Resources []struct {
			Ref, Status, Error string
		} `json:"resources"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	failed, written := 0, 0
	for _, res := range rep.Resources {
		if res.Status == "failed" {
			failed++
			require.Contains(t, res.Error, "maximum child runs of the run tree exceeded")
			require.Contains(t, res.Error, "--max-tree-runs")
		}
	}
	for i := range 5 {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("out%d.txt", i))); err == nil {
			written++
		}
	}
	require.Equal(t, 2, failed, r.stdout)
	require.Equal(t, 3, written)

	r = run(t, "apply", "--max-tree-runs", "0", filepath.Join(dir, "manifest.yaml"))
	require.Equal(t, ExitInvalid, r.code)
	require.Contains(t, r.stderr, "--max-tree-runs must be at least 1")
}

// A file whose content is larger than one bus message is applied: its
// task travels by reference.
func TestApplyLargeContent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	content := strings.Repeat("0123456789abcdef", 100_000) // 1.6 MB
	writeFiles(t, dir, map[string]string{
		"manifest.yaml": "ordering: manifest\nresources:\n  - file:\n      - $D/big.txt: {content: \"" + content + "\"}\n      - $D/after.txt: {content: done}\n",
	})
	r := run(t, "apply", "--output", "json", "--facts-dir", dir, filepath.Join(dir, "manifest.yaml"))
	require.Equal(t, ExitOK, r.code, "%s", r.stderr)
	got, err := os.ReadFile(filepath.Join(dir, "big.txt"))
	require.NoError(t, err)
	require.Equal(t, content, string(got))
	_, err = os.Stat(filepath.Join(dir, "after.txt"))
	require.NoError(t, err)
}

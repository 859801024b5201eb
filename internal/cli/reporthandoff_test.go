package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// TestApplyPrintsTheReportItsCoordinatorStored: an embedded apply prints
// the report its coordinator handed over (coordinator.Config.Finished)
// without reading it back from the store, in JSON and in text; a run
// whose report nests a child run's is read back, child included. Not
// parallel: it swaps getReport.
func TestApplyPrintsTheReportItsCoordinatorStored(t *testing.T) {
	var reads atomic.Int64
	defer func(f func(context.Context, *bus.Bus, string) (*coordinator.Report, error)) { getReport = f }(getReport)
	getReport = func(ctx context.Context, b *bus.Bus, runID string) (*coordinator.Report, error) {
		reads.Add(1)
		return coordinator.GetReport(ctx, b, runID)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"manifest.yaml": `post_message: all done
resources:
  - file:
      - $D/a.txt: {content: "a\n"}
  - exec:
      - broken: {command: "false"}
`,
		"tree.yaml": `resources:
  - apply:
      - child.yaml: {}
`,
		"child.yaml": "resources:\n  - file:\n      - $D/c.txt: {content: \"c\\n\"}\n",
	})

	r := run(t, "apply", "--output", "json", "--facts-dir", dir, filepath.Join(dir, "manifest.yaml"))
	require.Equal(t, ExitFailed, r.code, "%+v", r)
	require.Zero(t, reads.Load(), "the report was read back from the store")
	require.True(t, strings.HasSuffix(r.stdout, "}\n"))
	require.True(t, strings.HasPrefix(r.stdout, "{\n  \"run_id\": "), r.stdout)
	var rep coordinator.Report
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, coordinator.RunFailed, rep.Status)
	require.Equal(t, coordinator.Counts{Total: 2, Changed: 1, Failed: 1}, rep.Counts)
	require.Equal(t, "changed", rep.Resources[0].Status)
	require.Equal(t, "failed", rep.Resources[1].Status)
	require.Empty(t, rep.PostMessage, "a failed run has no post_message")

	r = run(t, "apply", "--facts-dir", dir, filepath.Join(dir, "manifest.yaml"))
	require.Equal(t, ExitFailed, r.code, "%+v", r)
	require.Zero(t, reads.Load())
	require.Contains(t, r.stdout, "1 failed")

	r = run(t, "apply", "--output", "json", "--facts-dir", dir, filepath.Join(dir, "tree.yaml"))
	require.Equal(t, ExitOK, r.code, "%+v", r)
	require.Equal(t, int64(1), reads.Load(), "a report nesting a child run's is read back")
	rep = coordinator.Report{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.NotNil(t, rep.Resources[0].Child)
	require.Equal(t, "changed", rep.Resources[0].Child.Resources[0].Status)
}

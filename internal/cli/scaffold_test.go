package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A scaffold through `manifold apply`: the templates travel in the bundle,
// render with the run's data, partials are not written, a post command runs
// for the files it matches, and a second apply is stable.
func TestApplyScaffold(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "out")
	writeFiles(t, dir, map[string]string{
		"manifest.yaml": `data: {port: 8080}
resources:
  - scaffold:
      - ` + target + `:
          source: tpl
          post:
            - "*.sh": "chmod 0755 {}"
`,
		"tpl/_partials/head.conf": "# [[ data.port ]]\n",
		"tpl/app.conf":            "[[ render(\"_partials/head.conf\", .) ]]port = [[ data.port ]]\n",
		"tpl/bin/check.sh":        "#!/bin/sh\ncurl -sf http://localhost:[[ data.port ]]/\n",
	})
	m := filepath.Join(dir, "manifest.yaml")
	r := run(t, "apply", "--output", "json", "--facts-dir", dir, m)
	require.Equal(t, ExitOK, r.code, "%s\n%s", r.stdout, r.stderr)
	var rep struct {
		Counts struct{ Changed, Stable int }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, 1, rep.Counts.Changed)
	got, err := os.ReadFile(filepath.Join(target, "app.conf"))
	require.NoError(t, err)
	require.Equal(t, "# 8080\nport = 8080\n", string(got))
	fi, err := os.Stat(filepath.Join(target, "bin", "check.sh"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	_, err = os.Stat(filepath.Join(target, "_partials"))
	require.True(t, os.IsNotExist(err), "partials are never written")

	r = run(t, "apply", "--output", "json", "--facts-dir", dir, m)
	require.Equal(t, ExitOK, r.code, "%s", r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, 0, rep.Counts.Changed)
	require.Equal(t, 1, rep.Counts.Stable)
}

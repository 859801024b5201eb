package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A CCM manifest whose resources a Jet file generates from hierarchy
// data, with manifest-level defaults, a template file read on the worker
// and pre/post messages, applied through the embedded engine.
func TestApplyJetFileDefaultsMessages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"manifest.yaml": `hierarchy:
  order: ["env:{{ lookup('facts.env') }}"]
data:
  files: [a]
overrides:
  env:prod:
    files: [a, b]
ccm:
  pre_message: "deploying {{ len(data.files) }} files"
  post_message: "all done"
  defaults:
    file: {mode: "0600", content: "{{ template('body.templ') }}"}
  resources_jet_file: resources.jet
`,
		"resources.jet": "[[ range Data.files ]]\n- file:\n    - $D/out/[[ . ]].txt: {}\n[[ end ]]",
		"body.templ":    "on {{ lookup('facts.env') }}\n",
		"out/.keep":     "",
	})
	r := run(t, "apply", filepath.Join(dir, "manifest.yaml"), "--facts-dir", dir, "--fact", "env=prod")
	require.Equal(t, ExitOK, r.code, "%+v", r)
	require.True(t, strings.HasPrefix(r.stdout, "deploying 2 files\n"), r.stdout)
	require.True(t, strings.HasSuffix(r.stdout, "all done\n"), r.stdout)
	for _, n := range []string{"a", "b"} {
		p := filepath.Join(dir, "out", n+".txt")
		got, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, "on prod\n", string(got))
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	}

	// The report carries both messages.
	r = run(t, "apply", filepath.Join(dir, "manifest.yaml"), "--facts-dir", dir, "--fact", "env=prod", "--output", "json")
	require.Equal(t, ExitOK, r.code, "%+v", r)
	var rep struct {
		Pre    string `json:"pre_message"`
		Post   string `json:"post_message"`
		Counts struct{ Total, Stable int }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Equal(t, "deploying 2 files", rep.Pre)
	require.Equal(t, "all done", rep.Post)
	require.Equal(t, 2, rep.Counts.Stable, "a second apply is stable")

	// render shows the generated resources.
	r = run(t, "render", filepath.Join(dir, "manifest.yaml"), "--facts-dir", dir)
	require.Equal(t, ExitOK, r.code, "%+v", r)
	require.Contains(t, r.stdout, filepath.Join(dir, "out", "a.txt"))
	require.NotContains(t, r.stdout, filepath.Join(dir, "out", "b.txt"))
}

// A failed resource suppresses the post message.
func TestPostMessageOnlyWithoutFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"manifest.yaml": "pre_message: starting\npost_message: finished\nresources:\n  - exec:\n      - /bin/false: {}\n",
	})
	r := run(t, "apply", filepath.Join(dir, "manifest.yaml"), "--facts-dir", dir)
	require.Equal(t, ExitFailed, r.code, "%+v", r)
	require.Contains(t, r.stdout, "starting\n")
	require.NotContains(t, r.stdout, "finished")
}

func TestSchemaJSONSchema(t *testing.T) {
	t.Parallel()
	r := run(t, "schema", "--json-schema")
	require.Equal(t, ExitOK, r.code, "%+v", r)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	require.Equal(t, "https://json-schema.org/draft/2020-12/schema", doc["$schema"])
	require.Contains(t, doc["properties"], "resources")
	r = run(t, "schema", "--json-schema", "file")
	require.Equal(t, ExitInvalid, r.code)
}

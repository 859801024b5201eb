package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEnsure: `manifold ensure TYPE NAME --prop value` applies one
// resource with the embedded engine like apply: --noop changes nothing,
// a second run is stable, a bad property is exit 2 naming the field.
func TestEnsure(t *testing.T) {
	dir := t.TempDir()
	motd := filepath.Join(dir, "motd")

	code, out, errOut := runCLI(t, "ensure", "file", motd, "--content", "hello\n", "--mode", "0640", "--noop")
	require.Equal(t, ExitOK, code, "stdout %q stderr %q", out, errOut)
	require.Contains(t, out, "would change file#"+motd)
	require.NoFileExists(t, motd)

	code, out, errOut = runCLI(t, "ensure", "file", motd, "--content", "hello\n", "--mode", "0640")
	require.Equal(t, ExitOK, code, "stdout %q stderr %q", out, errOut)
	require.Contains(t, out, "changed      file#"+motd)
	b, err := os.ReadFile(motd)
	require.NoError(t, err)
	require.Equal(t, "hello\n", string(b))
	fi, err := os.Stat(motd)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), fi.Mode().Perm())

	// --set, typed scalars and the JSON report, as apply.
	code, out, errOut = runCLI(t, "ensure", "exec", "touch "+filepath.Join(dir, "x"), "--set", "creates="+filepath.Join(dir, "x"), "--set", "retry=2", "--output", "json")
	require.Equal(t, ExitOK, code, "stdout %q stderr %q", out, errOut)
	var report struct {
		Status string `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &report), out)
	require.Equal(t, "succeeded", report.Status)
	require.FileExists(t, filepath.Join(dir, "x"))

	code, out, errOut = runCLI(t, "ensure", "file", motd, "--content", "hello\n", "--mode", "0640")
	require.Equal(t, ExitOK, code, "stdout %q stderr %q", out, errOut)
	require.Contains(t, out, "1 stable")

	code, out, errOut = runCLI(t, "ensure", "file", motd, "--mode", "999", "--set", "colour=red")
	require.Equal(t, ExitInvalid, code, "stdout %q stderr %q", out, errOut)
	require.Contains(t, errOut, "ensure: resources[0].file[0]."+motd+".mode: invalid value \"999\"")
	require.Contains(t, errOut, "ensure: resources[0].file[0]."+motd+".colour: field not allowed")
	require.NotContains(t, errOut, os.TempDir()+"/manifold-ensure-")

	code, _, errOut = runCLI(t, "ensure", "file")
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut, "want TYPE and NAME")
	code, _, errOut = runCLI(t, "ensure", "nosuch", "x")
	require.Equal(t, ExitInvalid, code, errOut)
}

package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInvalidInputExits2: every flag value out of range, a run ID that can
// never be valid and an empty manifest are exit 2, with a message naming
// them, before anything connects or runs.
func TestInvalidInputExits2(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "m.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte("resources:\n  - {type: exec, name: \"true\"}\n"), 0o600))
	for name, content := range map[string]string{"empty.yaml": "", "blank.yaml": "\n  \n", "comments.yaml": "# nothing yet\n", "null.yaml": "null\n",
		"target.yaml":  "resources:\n  - {type: exec, name: \"true\", target: \"web servers\"}\n",
		"target2.yaml": "resources:\n  - {type: exec, name: \"true\", target: \"{{ data.pool }}\"}\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	// Nothing listens here: a command that got as far as connecting
	// would exit 3, not 2.
	env := envOf(map[string]string{"MANIFOLD_SERVER": "nats://127.0.0.1:1", credentialsEnv: dir})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"apply", "--timeout", "0", manifest}, "--timeout 0s: must be more than 0"},
		{[]string{"apply", "--timeout", "-1s", manifest}, "--timeout -1s"},
		{[]string{"apply", "--concurrency", "-1", manifest}, "--concurrency -1: must not be negative"},
		{[]string{"apply", manifest, "--max-depth", "0"}, "--max-depth 0"},
		{[]string{"run", "--timeout", "0", manifest}, "--timeout 0s"},
		{[]string{"run", "--task-timeout", "-1s", manifest}, "--task-timeout -1s"},
		{[]string{"worker", "--concurrency", "0"}, "--concurrency 0: must be at least 1"},
		{[]string{"worker", "--ack-wait", "0"}, "--ack-wait 0s"},
		{[]string{"worker", "--drain-timeout", "-5s"}, "--drain-timeout -5s"},
		{[]string{"coordinator", "--lease", "0"}, "--lease 0s"},
		{[]string{"coordinator", "--replicas", "6"}, "--replicas 6: must be 1 to 5"},
		{[]string{"runs", "--limit", "0"}, "--limit 0"},
		{[]string{"worker", "--pool", "web,db servers"}, "--pool: \"db servers\" may hold only"},
		{[]string{"worker", "--name", "w.1"}, "--name: \"w.1\" may hold only"},
		{[]string{"run", "--pool", "a>", manifest}, "--pool: \"a>\""},
		{[]string{"status", "*"}, "run ID \"*\" may hold only"},
		{[]string{"status", "run.1"}, "run ID"},
		{[]string{"cancel", "a>"}, "run ID"},
		{[]string{"apply", filepath.Join(dir, "empty.yaml")}, "the manifest is empty"},
		{[]string{"apply", filepath.Join(dir, "blank.yaml")}, "the manifest is empty"},
		{[]string{"validate", filepath.Join(dir, "comments.yaml")}, "the manifest is empty"},
		{[]string{"run", filepath.Join(dir, "null.yaml")}, "the manifest is empty"},
		{[]string{"validate", filepath.Join(dir, "target.yaml")}, "resources[0].target: invalid value \"web servers\""},
		{[]string{"apply", filepath.Join(dir, "target2.yaml")}, "resources[0].target: invalid value"},
	} {
		var out, errOut syncBuffer
		code := Run(t.Context(), IO{Stdout: &out, Stderr: &errOut, Getenv: env}, tc.args)
		if code != ExitInvalid || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("manifold %s: exit %d, want 2 and %q in stderr:\n%s%s", strings.Join(tc.args, " "), code, tc.want, out.String(), errOut.String())
		}
	}
	// At the limits: valid.
	var out, errOut syncBuffer
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nothing.yaml"), []byte("resources: []\n"), 0o600))
	code := Run(t.Context(), IO{Stdout: &out, Stderr: &errOut, Getenv: env}, []string{"apply", "--timeout", "1ns", "--concurrency", "0", "--output", "json", manifest})
	require.Equal(t, ExitUnavailable, code, "%s%s", out.String(), errOut.String()) // valid flags; the run times out
	code = Run(t.Context(), IO{Stdout: &out, Stderr: &errOut, Getenv: env}, []string{"validate", filepath.Join(dir, "nothing.yaml")})
	require.Equal(t, ExitOK, code, "%s%s", out.String(), errOut.String())
}

// TestTimeoutPrintsJSONReport: a run that outlives --timeout still prints
// a report with --output json: its status and why it was given up.
func TestTimeoutPrintsJSONReport(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "m.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte("resources:\n  - {type: exec, name: sleep, command: \"sleep 600\"}\n"), 0o600))
	t.Setenv("TMPDIR", dir)
	var out, errOut syncBuffer
	code := Run(t.Context(), IO{Stdout: &out, Stderr: &errOut, Getenv: envOf(nil)}, []string{"apply", "--timeout", "1s", "--output", "json", manifest})
	require.Equal(t, ExitUnavailable, code, errOut.String())
	var rep struct {
		RunID     string `json:"run_id"`
		Status    string `json:"status"`
		Error     string `json:"error"`
		Resources []struct {
			Status string `json:"status"`
		} `json:"resources"`
	}
	require.NoError(t, json.Unmarshal([]byte(out.String()), &rep), "stdout: %s\nstderr: %s", out.String(), errOut.String())
	require.NotEmpty(t, rep.RunID)
	require.Equal(t, "cancelled", rep.Status, out.String())
	require.Contains(t, rep.Error, "run did not finish within --timeout 1s")
	require.Len(t, rep.Resources, 1)
}

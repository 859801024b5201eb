package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeDataFile writes a YAML data file of exactly size bytes: name, and
// big holding the padding.
func writeDataFile(t *testing.T, path string, size int) {
	t.Helper()
	head, tail := "name: hello\nbig: ", "\n"
	require.NoError(t, os.WriteFile(path, []byte(head+strings.Repeat("x", size-len(head)-len(tail))+tail), 0o644))
}

// Run data up to the --data-file limit (4 MiB, four times a message's
// maximum payload) reaches the run, its child runs and the workers, on the
// embedded engine and through a server's API; one byte more is a usage
// error naming the limit, before anything runs.
func TestDataFileAtLimitTravels(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"m.yaml":       "resources:\n  - apply:\n      - child/m.yaml: {}\n",
		"child/m.yaml": "resources:\n  - file:\n      - \"{{ lookup('data.out') }}\": {content: \"{{ lookup('data.name') }} {{ len(lookup('data.big')) }}\"}\n",
	})
	at, over := filepath.Join(dir, "at.yaml"), filepath.Join(dir, "over.yaml")
	writeDataFile(t, at, MaxDataFileBytes)
	writeDataFile(t, over, MaxDataFileBytes+1)
	bigLen := MaxDataFileBytes - len("name: hello\nbig: \n")

	out := filepath.Join(dir, "embedded.txt")
	r := run(t, "apply", filepath.Join(dir, "m.yaml"), "--facts-dir", dir, "--data-file", at, "--data", "out="+out)
	require.Equal(t, ExitOK, r.code, "%+v", r)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, "hello "+strconv.Itoa(bigLen), string(got))

	r = run(t, "apply", filepath.Join(dir, "m.yaml"), "--facts-dir", dir, "--data-file", over, "--data", "out="+out)
	require.Equal(t, ExitInvalid, r.code, "%+v", r)
	require.Contains(t, r.stderr, "--data-file "+over+": larger than the limit of 4194304 bytes (4 MiB)")

	// Through a server: the run request goes to the API, the coordinator
	// plans from the bundle. 1.5 MiB is over a message's maximum payload
	// and keeps the test fast under -race.
	mid := filepath.Join(dir, "mid.yaml")
	writeDataFile(t, mid, 3<<19)
	srv := startCommand(t, envOf(map[string]string{}), "server", "--listen", "127.0.0.1:0", "--store-dir", filepath.Join(dir, "js"), "--insecure-no-auth")
	url := srv.waitFor(t, listeningRE)
	env := envOf(map[string]string{"MANIFOLD_SERVER": url})
	startCommand(t, env, "coordinator", "--name", "c1").waitFor(t, regexp.MustCompile(`(coordinator started)`))
	startCommand(t, env, "worker", "--name", "w1", "--cache-dir", filepath.Join(dir, "cache"), "--facts-dir", dir).waitFor(t, regexp.MustCompile(`(worker started)`))
	out = filepath.Join(dir, "remote.txt")
	var stdout, stderr syncBuffer
	code := Run(t.Context(), IO{Stdout: &stdout, Stderr: &stderr, Getenv: env},
		[]string{"run", "--follow", "--timeout", "60s", filepath.Join(dir, "m.yaml"), "--data-file", mid, "--data", "out=" + out})
	require.Equal(t, ExitOK, code, "%s%s", stdout.String(), stderr.String())
	got, err = os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, "hello "+strconv.Itoa(3<<19-len("name: hello\nbig: \n")), string(got))
}

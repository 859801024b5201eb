package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunWhere: run --where fans out over the matching live workers (here
// the only one); a --where matching none is refused with exit 2 naming the
// expression; a --answer-timeout that is not positive is exit 2.
func TestRunWhere(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.txt")
	manifest := filepath.Join(dir, "m.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte("resources:\n  - file:\n      - "+out+": {content: hi}\n"), 0o644))

	r := run(t, "run", "--answer-timeout", "0s", "--where", "true", manifest)
	require.Equal(t, ExitInvalid, r.code, "%+v", r)
	require.Contains(t, r.stderr, "--answer-timeout 0s: must be positive")

	srv := startCommand(t, envOf(map[string]string{}), "server", "--listen", "127.0.0.1:0", "--store-dir", filepath.Join(dir, "js"), "--insecure-no-auth")
	url := srv.waitFor(t, listeningRE)
	env := envOf(map[string]string{"MANIFOLD_SERVER": url})
	startCommand(t, env, "coordinator", "--name", "c1").waitFor(t, regexp.MustCompile(`(coordinator started)`))
	startCommand(t, env, "worker", "--name", "w1", "--cache-dir", filepath.Join(dir, "cache"), "--facts-dir", dir).waitFor(t, regexp.MustCompile(`(worker started)`))

	var stdout, stderr syncBuffer
	code := Run(t.Context(), IO{Stdout: &stdout, Stderr: &stderr, Getenv: env},
		[]string{"run", "--timeout", "60s", "--where", "1 == 2", manifest})
	require.Equal(t, ExitInvalid, code, "%s%s", stdout.String(), stderr.String())
	require.Contains(t, stderr.String(), `where "1 == 2" matches no live worker of pool "default" (of 1)`)
	require.NoFileExists(t, out)

	stdout, stderr = syncBuffer{}, syncBuffer{}
	code = Run(t.Context(), IO{Stdout: &stdout, Stderr: &stderr, Getenv: env},
		[]string{"run", "--wait", "--timeout", "60s", "--where", "facts != nil", "--answer-timeout", "30s", manifest})
	require.Equal(t, ExitOK, code, "%s%s", stdout.String(), stderr.String())
	require.FileExists(t, out)
}

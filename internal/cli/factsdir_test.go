package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// helperEnv makes the test binary run one command line as the helper
// process: args separated by US (0x1f), the default facts directory in
// helperFactsEnv.
const (
	helperArgsEnv  = "MANIFOLD_TEST_CLI_ARGS"
	helperFactsEnv = "MANIFOLD_TEST_DEFAULT_FACTS_DIR"
)

// TestMain runs the helper command when asked to (as another user, see
// runAs), else the tests.
func TestMain(m *testing.M) {
	if args := os.Getenv(helperArgsEnv); args != "" {
		defaultFactsDir = os.Getenv(helperFactsEnv)
		os.Exit(Run(context.Background(), IO{Stdout: os.Stdout, Stderr: os.Stderr}, strings.Split(args, "\x1f")))
	}
	// Embedded applies keep their state (last-applied documents, refresh
	// debts) in a directory of this test binary's.
	state, err := os.MkdirTemp("", "manifold-cli-state-")
	if err != nil {
		panic(err)
	}
	os.Setenv("MANIFOLD_STATE_DIR", state)
	code := m.Run()
	os.RemoveAll(state)
	os.Exit(code)
}

// runAs runs the command line with defaultFactsDir set to factsDir: as
// nobody in a copy of the test binary when the test runs as root (root
// reads any directory), else in this process.
func runAs(t *testing.T, bin, factsDir string, args ...string) result {
	t.Helper()
	if os.Geteuid() != 0 {
		old := defaultFactsDir
		defaultFactsDir = factsDir
		defer func() { defaultFactsDir = old }()
		return run(t, args...)
	}
	cmd := exec.CommandContext(t.Context(), "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + filepath.Dir(bin), helperArgsEnv + "=" + strings.Join(args, "\x1f"), helperFactsEnv + "=" + factsDir}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{code, out.String(), errOut.String()}
}

// A root `manifold server` creates the credentials directory's parents
// 0755 and the directory itself 0700, so other users' commands still read
// the default facts directory; one that is unreadable (as older servers
// left /etc/manifold) is a warning when it is the default and an error
// when the user names it.
func TestUnreadableDefaultFactsDir(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Skip("running as root without setpriv: cannot run a command as another user")
		}
	}
	// A directory other users may enter, unlike t.TempDir's.
	root, err := os.MkdirTemp("", "manifold-factsdir-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	require.NoError(t, os.Chmod(root, 0o755))

	etc := filepath.Join(root, "etc", "manifold")
	creds := filepath.Join(etc, "credentials")
	srv := startCommand(t, envOf(map[string]string{}), "server", "--listen", "127.0.0.1:0",
		"--store-dir", filepath.Join(t.TempDir(), "store"), "--credentials", creds)
	srv.waitFor(t, listeningRE)
	for dir, want := range map[string]os.FileMode{filepath.Join(root, "etc"): 0o755, etc: 0o755, creds: 0o700} {
		st, err := os.Stat(dir)
		require.NoError(t, err)
		require.Equal(t, want, st.Mode().Perm(), dir)
	}
	writeFiles(t, etc, map[string]string{"facts.d/10-role.json": `{"role": "web"}`})
	writeFiles(t, root, map[string]string{"m.yaml": `hierarchy:
  order: ["role:{{ lookup('facts.role') }}"]
data: {who: none}
overrides:
  role:web: {who: web}
  role:db: {who: db}
resources:
  - exec:
      - "{{ lookup('data.who') }}": {command: /bin/true}
`})

	// The test binary, where nobody may run it.
	bin := filepath.Join(root, "cli.test")
	copyFile(t, os.Args[0], bin)

	// The server's layout: nobody reads the facts.
	r := runAs(t, bin, etc, "render", filepath.Join(root, "m.yaml"))
	require.Equal(t, ExitOK, r.code, "%+v", r)
	require.Contains(t, r.stdout, `"web"`)
	require.NotContains(t, r.stderr, "warning")

	// A root-only facts directory (an older server's /etc/manifold).
	private := filepath.Join(root, "private")
	writeFiles(t, private, map[string]string{"facts.d/10-role.json": `{"role": "db"}`})
	require.NoError(t, os.Chmod(private, 0o700))
	if os.Geteuid() != 0 {
		require.NoError(t, os.Chmod(private, 0o000))
		t.Cleanup(func() { _ = os.Chmod(private, 0o755) })
	}
	for _, cmd := range []string{"validate", "render"} {
		r = runAs(t, bin, private, cmd, filepath.Join(root, "m.yaml"))
		require.Equal(t, ExitOK, r.code, "%s: %+v", cmd, r)
		require.Contains(t, r.stderr, fmt.Sprintf("manifold %s: warning: facts: lstat %s: permission denied", cmd, filepath.Join(private, "facts.json")))
	}
	require.Contains(t, r.stdout, `"none"`)

	r = runAs(t, bin, etc, "validate", filepath.Join(root, "m.yaml"), "--facts-dir", private)
	require.Equal(t, ExitInvalid, r.code, "%+v", r)
	require.Contains(t, r.stderr, "permission denied")
	require.NotContains(t, r.stderr, "warning")
}

// A FIFO in the facts directory is skipped with a warning: the command
// finishes.
func TestFactsDirFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"facts.d/10-role.json": `{"role": "web"}`})
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "facts.d", "20-fifo.json"), 0o644))
	done := make(chan result, 1)
	go func() { done <- run(t, "facts", "--no-system", "--facts-dir", dir, "role") }()
	select {
	case r := <-done:
		require.Equal(t, ExitOK, r.code, "%+v", r)
		require.Equal(t, "web\n", r.stdout)
		require.Contains(t, r.stderr, "manifold facts: warning: facts: not a regular file: "+filepath.Join(dir, "facts.d", "20-fifo.json")+" is a FIFO; skipped")
	case <-t.Context().Done():
		t.Fatal("test ended before the command")
	case <-time.After(10 * time.Second):
		t.Fatal("manifold facts with a FIFO in facts.d did not finish within 10s")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
}

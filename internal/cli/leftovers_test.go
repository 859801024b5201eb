package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
)

// helperEnv makes the test binary act as a helper process (see
// TestHelperProcess) instead of running tests.
const helperEnv = "MANIFOLD_CLI_TEST_HELPER"

// TestHelperProcess is not a test: run by the tests below as a separate
// process, it either starts an embedded engine, prints its store directory
// and waits to be killed ("embedded"), or is the manifold command ("main").
func TestHelperProcess(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "embedded":
	case "main":
		// cmd/manifold's main: the signal context, then the CLI, with the
		// arguments after "--".
		args := os.Args
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Run(ctx, IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, args)
		stop()
		os.Exit(code)
	default:
		t.Skip("helper process only")
	}
	e, err := startEmbedded(context.Background(), embeddedOpts{Concurrency: 1})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("store:", e.dir)
	select {}
}

// TestAbandonedEmbeddedStoreRemoved: the store directory of an embedded
// engine killed with SIGKILL is removed by the next engine's start; the
// store of a live engine is not.
func TestAbandonedEmbeddedStoreRemoved(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"=embedded")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	dead, ok := strings.CutPrefix(strings.TrimSpace(line), "store: ")
	require.True(t, ok, "helper said %q", line)
	require.True(t, strings.HasPrefix(dead, filepath.Join(tmp, embeddedStorePrefix)), dead)

	live, err := startEmbedded(t.Context(), embeddedOpts{Concurrency: 1})
	require.NoError(t, err)
	defer live.close()

	// While the helper lives its store is in use.
	age := time.Now().Add(-time.Minute)
	for _, d := range []string{dead, live.dir} {
		require.NoError(t, os.Chtimes(filepath.Join(d, bus.StoreLockFile), age, age))
	}
	removeAbandonedStores(tmp)
	require.DirExists(t, dead)

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	removeAbandonedStores(tmp)
	require.NoDirExists(t, dead)
	require.DirExists(t, live.dir)
}

// TestEngineStartSweepsAbandonedStores: an engine's start removes, beside
// its own start, the stores of engines long gone (a lock file no process
// holds, older than the grace) and leaves its own; the sweep is over
// once the engine is closed.
func TestEngineStartSweepsAbandonedStores(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dead := filepath.Join(tmp, embeddedStorePrefix+"killed")
	require.NoError(t, os.MkdirAll(filepath.Join(dead, "jetstream"), 0o700))
	lock := filepath.Join(dead, bus.StoreLockFile)
	require.NoError(t, os.WriteFile(lock, nil, 0o600))
	age := time.Now().Add(-time.Minute)
	require.NoError(t, os.Chtimes(lock, age, age))

	e, err := startEmbedded(t.Context(), embeddedOpts{Concurrency: 1})
	require.NoError(t, err)
	own := e.dir
	e.close()
	require.NoDirExists(t, dead)
	require.NoDirExists(t, own, "its own, removed by its close")
}

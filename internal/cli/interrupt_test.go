package cli

import (
	"bufio"
	"encoding/json"
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

// signalBound is how long `manifold apply` may take to exit after SIGTERM:
// the cancel request and the report (5s each at most) and stopping the
// engine (5s at most), with room for a loaded machine.
const signalBound = 25 * time.Second

// startApply runs `manifold apply` as a separate process (this test binary
// as main) on a manifest whose child run sleeps, and returns once the
// sleep has started.
func startApply(t *testing.T, extra ...string) (*exec.Cmd, *strings.Builder, io.Reader) {
	t.Helper()
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "child.yaml"), []byte(
		"resources:\n  - {type: exec, name: long, provider: shell, command: \"touch "+started+" && exec sleep 600\"}\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "site.yaml"), []byte(
		"resources:\n  - {type: apply, name: child.yaml}\n"), 0o600))
	args := append([]string{"-test.run=^TestHelperProcess$", "--", "apply"}, extra...)
	cmd := exec.Command(os.Args[0], append(args, filepath.Join(dir, "site.yaml"))...)
	cmd.Env = append(os.Environ(), helperEnv+"=main", "TMPDIR="+dir)
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// The progress of the run comes on stdout; the sleep's marker file
	// says it runs. Wait on the file with a bounded poll of the directory.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child run's command did not start within 60s:\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd, stderr, stdout
}

// waitExit waits for the process to exit within bound and returns its exit
// code.
func waitExit(t *testing.T, cmd *exec.Cmd, bound time.Duration, stderr *strings.Builder) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(bound):
		t.Fatalf("manifold apply did not exit within %s of the signal:\n%s", bound, stderr)
		return -1
	}
}

// TestApplySIGTERMEndsRun: SIGTERM ends `manifold apply` of a manifest
// whose child run is blocked in a long command within a bound, with exit 3
// and, with --output json, a report saying why.
func TestApplySIGTERMEndsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a process")
	}
	cmd, stderr, stdout := startApply(t, "--output", "json")
	out := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(stdout); out <- b }()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	code := waitExit(t, cmd, signalBound, stderr)
	require.Equal(t, ExitUnavailable, code, stderr.String())
	var rep struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	data := <-out
	require.NoError(t, json.Unmarshal(data, &rep), "stdout: %s\nstderr: %s", data, stderr)
	require.NotEmpty(t, rep.RunID)
	require.Contains(t, rep.Error, "signal received", string(data))
	require.Equal(t, "cancelled", rep.Status, string(data))
}

// TestApplySecondSignalExitsAtOnce: a second SIGINT ends `manifold apply`
// at once, whatever it was waiting for.
func TestApplySecondSignalExitsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a process")
	}
	cmd, stderr, stdout := startApply(t)
	go func() { _, _ = io.Copy(io.Discard, bufio.NewReader(stdout)) }()
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	code := waitExit(t, cmd, 5*time.Second, stderr)
	require.Equal(t, ExitUnavailable, code, stderr.String())
}

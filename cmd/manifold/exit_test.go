package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// mainArgsEnv makes the test binary run main with these arguments
// (separated by US, 0x1f), as the manifold command would.
const mainArgsEnv = "MANIFOLD_TEST_MAIN_ARGS"

// TestApplyExitRemovesStore: `manifold apply` as a process leaves its
// embedded server for the exit to end (cli.IO.ProcessExits), yet runs
// the manifest, prints its report and exits with its code, and leaves no
// store directory behind, first apply and converged one alike.
func TestApplyExitRemovesStore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the command as a process")
	}
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "f1.conf")
	manifest := filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(manifest, []byte("data: {greeting: hello}\nresources:\n  - file:\n      - "+target+
		":\n          ensure: present\n          content: \"{{ lookup('data.greeting') }} from file 1\\n\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		status          string
		changed, stable int
	}{{"changed", 1, 0}, {"stable", 0, 1}} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), mainArgsEnv+"=apply\x1f--output\x1fjson\x1f"+manifest,
			"TMPDIR="+tmp, "MANIFOLD_STATE_DIR="+filepath.Join(dir, "state"))
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("apply %d: %v; stderr:\n%s", i+1, err, stderr.String())
			}
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("apply %d did not exit within 60s; stderr:\n%s", i+1, stderr.String())
		}
		var report struct {
			Status string `json:"status"`
			Counts struct {
				Changed, Stable int
			} `json:"counts"`
			Resources []struct {
				Status string `json:"status"`
			} `json:"resources"`
		}
		if err := json.Unmarshal([]byte(stdout.String()), &report); err != nil {
			t.Fatalf("apply %d: report: %v:\n%s", i+1, err, stdout.String())
		}
		if report.Status != "succeeded" || report.Counts.Changed != want.changed || report.Counts.Stable != want.stable ||
			len(report.Resources) != 1 || report.Resources[0].Status != want.status {
			t.Fatalf("apply %d: want one %s resource, got %+v", i+1, want.status, report)
		}
		got, err := os.ReadFile(target)
		if err != nil || string(got) != "hello from file 1\n" {
			t.Fatalf("apply %d: %s holds %q (%v)", i+1, target, got, err)
		}
		left, err := os.ReadDir(tmp)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range left {
			t.Errorf("apply %d left %s in the temporary directory", i+1, e.Name())
		}
	}
}

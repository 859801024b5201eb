package resources

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestOSRunnerOutputAndExitCode(t *testing.T) {
	t.Parallel()
	res, err := OSRunner{}.Run(t.Context(), Command{
		Argv: []string{"/bin/sh", "-c", "echo out; echo err >&2; exit 3"},
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode != 3 {
		t.Errorf("ExitCode = %d, want 3", res.ExitCode)
	}
	if got := string(res.Stdout); got != "out\n" {
		t.Errorf("Stdout = %q", got)
	}
	if got := string(res.Stderr); got != "err\n" {
		t.Errorf("Stderr = %q", got)
	}
}

func TestOSRunnerSignalExitCode(t *testing.T) {
	t.Parallel()
	res, err := OSRunner{}.Run(t.Context(), Command{Argv: []string{"/bin/sh", "-c", "kill -TERM $$"}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := 128 + int(syscall.SIGTERM); res.ExitCode != want {
		t.Errorf("ExitCode = %d, want %d", res.ExitCode, want)
	}
}

func TestOSRunnerDirEnvStdin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res, err := OSRunner{}.Run(t.Context(), Command{
		Argv:  []string{"/bin/sh", "-c", `pwd; echo "$MANIFOLD_A-$MANIFOLD_B"; cat`},
		Dir:   dir,
		Env:   []string{"MANIFOLD_A=1", "MANIFOLD_B=two words"},
		Stdin: strings.NewReader("from stdin"),
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	realDir, _ := filepath.EvalSymlinks(dir)
	want := realDir + "\n1-two words\nfrom stdin"
	if got := string(res.Stdout); got != want {
		t.Errorf("Stdout = %q, want %q", got, want)
	}
}

func TestOSRunnerPath(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	tool := filepath.Join(bin, "manifold-test-tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho \"tool $1 PATH=$PATH\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := bin + ":/usr/bin:/bin"
	res, err := OSRunner{}.Run(t.Context(), Command{Argv: []string{"manifold-test-tool", "x"}, Path: path})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := string(res.Stdout), "tool x PATH="+path+"\n"; got != want {
		t.Errorf("Stdout = %q, want %q", got, want)
	}

	// Without the Path the tool is not found: that is an error, not an exit code.
	_, err = OSRunner{}.Run(t.Context(), Command{Argv: []string{"manifold-test-tool"}, Path: "/nonexistent"})
	if !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Run without tool in PATH: err = %v, want ErrNotFound", err)
	}
}

func TestOSRunnerStartFailure(t *testing.T) {
	t.Parallel()
	_, err := OSRunner{}.Run(t.Context(), Command{Argv: []string{"/bin/sh"}, Dir: filepath.Join(t.TempDir(), "missing")})
	if err == nil {
		t.Fatal("Run in a missing dir: want an error")
	}
	if _, err := (OSRunner{}).Run(t.Context(), Command{}); err == nil {
		t.Fatal("Run with empty argv: want an error")
	}
}

// TestOSRunnerCancelKillsGroup checks that a cancelled command takes its
// grandchildren with it, and that Run returns promptly.
func TestOSRunnerCancelKillsGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := OSRunner{}.Run(ctx, Command{
		Argv: []string{"/bin/sh", "-c", `sleep 30 & echo $! > "$1"; wait`, "sh", pidFile},
	})
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Run took %v after cancel", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatalf("read pid file: %v", rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	waitDead(t, pid)
}

// waitDead fails unless pid is gone or a zombie (an orphan that init has not
// reaped yet) within a deadline.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			// Field 3 is the state; the command name in field 2 is in parens.
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still alive", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOSRunnerOutputCap(t *testing.T) {
	t.Parallel()
	res, err := OSRunner{}.Run(t.Context(), Command{
		Argv: []string{"/bin/sh", "-c", "yes 0123456789 | head -c 2500000; printf END"},
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	out := string(res.Stdout)
	if !strings.HasPrefix(out, "[manifold: ") || !strings.Contains(out, "bytes of output truncated]") {
		t.Errorf("output does not start with a truncation note: %q", out[:min(80, len(out))])
	}
	if !strings.HasSuffix(out, "END") {
		t.Errorf("output does not keep the tail: %q", out[max(0, len(out)-20):])
	}
	_, body, _ := strings.Cut(out, "]\n")
	if len(body) != MaxCommandOutput {
		t.Errorf("kept %d bytes, want %d", len(body), MaxCommandOutput)
	}
}

func TestTailBuffer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"fits", []string{"ab", "cd"}, "abcd"},
		{"exact", []string{"abcdefgh"}, "abcdefgh"},
		{"one big write", []string{"0123456789"}, "[manifold: 2 bytes of output truncated]\n23456789"},
		{"many small writes", []string{"012", "345", "678", "9"}, "[manifold: 2 bytes of output truncated]\n23456789"},
		{"big after small", []string{"xy", "0123456789"}, "[manifold: 4 bytes of output truncated]\n23456789"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &tailBuffer{max: 8}
			for _, w := range tt.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if got := string(b.Bytes()); got != tt.want {
				t.Errorf("Bytes = %q, want %q", got, tt.want)
			}
		})
	}
}

// ReplayRunner is tested here next to OSRunner, the runner it stands in for.

func TestReplayRunnerFromFile(t *testing.T) {
	t.Parallel()
	r, err := LoadReplay(filepath.Join("testdata", "replay", "dpkg.json"))
	if err != nil {
		t.Fatalf("LoadReplay: %v", err)
	}
	query := Command{Argv: []string{"dpkg-query", "-W", "-f=${Status} ${Version}", "jq"}}

	res, err := r.Run(t.Context(), query)
	if err != nil || res.ExitCode != 1 || !strings.Contains(string(res.Stderr), "no packages found") {
		t.Fatalf("first query = %+v, %v", res, err)
	}
	if err := r.Verify(); err == nil || !strings.Contains(err.Error(), "apt-get install -y jq") {
		t.Errorf("Verify before install = %v, want it to name apt-get", err)
	}
	if res, err := r.Run(t.Context(), Command{Argv: []string{"apt-get", "install", "-y", "jq"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("install = %+v, %v", res, err)
	}
	res, err = r.Run(t.Context(), query)
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "install ok installed 1.7.1-3" {
		t.Fatalf("second query = %+v, %v", res, err)
	}
	if err := r.Verify(); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if got := len(r.Calls()); got != 3 {
		t.Errorf("Calls = %d, want 3", got)
	}

	// Every step is used up now: a fourth query is unexpected.
	_, err = r.Run(t.Context(), query)
	if !errors.Is(err, ErrUnexpectedCommand) || !strings.Contains(err.Error(), `dpkg-query -W "-f=${Status} ${Version}" jq`) {
		t.Errorf("extra query: err = %v", err)
	}
}

func TestReplayRunnerErrors(t *testing.T) {
	t.Parallel()
	r := NewReplayRunner(ReplayStep{Argv: []string{"systemctl", "start", "x"}, Err: "no such file"})
	if _, err := r.Run(t.Context(), Command{Argv: []string{"systemctl", "stop", "x"}}); !errors.Is(err, ErrUnexpectedCommand) ||
		!strings.Contains(err.Error(), "systemctl stop x") {
		t.Errorf("unexpected command: err = %v", err)
	}
	if _, err := r.Run(t.Context(), Command{Argv: []string{"systemctl", "start", "x"}}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("step with Err: err = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := NewReplayRunner().Run(ctx, Command{Argv: []string{"true"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: err = %v", err)
	}
}

func TestLoadReplayErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"unknown-field.json": `[{"argv": ["x"], "exitcode": 1}]`,
		"empty-argv.json":    `[{"exit": 1}]`,
		"missing-file.json":  `[{"argv": ["x"], "stdout_file": "nope.stdout"}]`,
		"not-json.json":      `argv: [x]`,
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadReplay(p); err == nil {
			t.Errorf("LoadReplay(%s): want an error", name)
		}
	}
	if _, err := LoadReplay(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("LoadReplay(missing): want an error")
	}
}

// busyScript writes an executable script into a new directory and returns
// its path with its file still open for writing, as a process forked
// while it was written would hold it: starting it fails with "text file
// busy" until the file is closed.
func busyScript(t *testing.T) (string, *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "greet")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteString("#!/bin/sh\necho hello\n"); err != nil {
		t.Fatal(err)
	}
	return path, f
}

// A program busy when started (open for writing somewhere) is started
// again once it is not: the command runs, its output is there.
func TestRunStartsAgainWhileTextFileBusy(t *testing.T) {
	path, f := busyScript(t)
	before := busyStarts.Load()
	type result struct {
		res CommandResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := OSRunner{}.Run(t.Context(), Command{Argv: []string{path}})
		done <- result{res, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for busyStarts.Load() == before { // wait for the first busy start
		if time.Now().After(deadline) {
			t.Fatal("no start was found busy")
		}
		time.Sleep(time.Millisecond)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.res.ExitCode != 0 || string(r.res.Stdout) != "hello\n" {
		t.Fatalf("Run = %+v, %v; want hello and exit 0", r.res, r.err)
	}
}

// A program busy at every start fails after maxBusyStarts starts with the
// start's error.
func TestRunGivesUpOnTextFileBusy(t *testing.T) {
	path, _ := busyScript(t)
	before := busyStarts.Load()
	_, err := OSRunner{}.Run(t.Context(), Command{Argv: []string{path}})
	if !errors.Is(err, syscall.ETXTBSY) {
		t.Fatalf("Run: %v, want text file busy", err)
	}
	if got := busyStarts.Load() - before; got != maxBusyStarts-1 {
		t.Fatalf("started again %d times, want %d", got, maxBusyStarts-1)
	}
}

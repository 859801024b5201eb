package exec

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-run/manifold/resources"
)

// guardLog returns a shell guard that appends name to a log file and exits
// code, and a function reading the log.
func guardLog(t *testing.T, name string, code int) (string, func() string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "log")
	return "echo " + name + " >> " + log + "; exit " + strconv.Itoa(code), func() string {
		b, err := os.ReadFile(log)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		return string(b)
	}
}

func TestGuardsRunInNoop(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "marker")
	unless, ran := guardLog(t, "unless", 0)
	e := newExec(t, resources.Spec{Name: "touch " + marker, Provider: "shell", Properties: map[string]any{"unless": unless}})
	out := resources.Execute(t.Context(), e, &resources.Env{Noop: true})
	if out.Status != resources.StatusStable || out.Message != "unless "+unless+" exited 0" {
		t.Fatalf("noop outcome %+v", out)
	}
	if ran() != "unless\n" {
		t.Fatalf("guard log %q: the guard did not run in noop", ran())
	}

	onlyif, ran := guardLog(t, "onlyif", 0)
	e = newExec(t, resources.Spec{Name: "touch " + marker, Provider: "shell", Properties: map[string]any{"onlyif": onlyif}})
	out = resources.Execute(t.Context(), e, &resources.Env{Noop: true})
	if out.Status != resources.StatusChanged || !out.Noop || out.Message != "would run touch "+marker {
		t.Fatalf("noop outcome %+v", out)
	}
	if ran() != "onlyif\n" || exists(t, marker) {
		t.Fatalf("guard log %q, marker %v", ran(), exists(t, marker))
	}
}

func TestCreatesBeatsGuards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	onlyif, ran := guardLog(t, "onlyif", 0)
	unless, _ := guardLog(t, "unless", 1)
	e := newExec(t, resources.Spec{Name: "touch ran", Provider: "shell", Properties: map[string]any{
		"creates": "done", "onlyif": onlyif, "unless": unless,
	}})
	for _, noop := range []bool{true, false} {
		out := resources.Execute(t.Context(), e, &resources.Env{WorkDir: dir, Noop: noop})
		if out.Status != resources.StatusStable || out.Message != "creates done exists" {
			t.Fatalf("noop %v: outcome %+v", noop, out)
		}
	}
	if ran() != "" || exists(t, filepath.Join(dir, "ran")) {
		t.Fatalf("guards ran (%q) or the command ran although creates exists", ran())
	}
}

func TestRefreshBeatsGuards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	unless, ran := guardLog(t, "unless", 0)
	e := newExec(t, resources.Spec{Name: "echo run >> count", Provider: "shell", Properties: map[string]any{
		"creates": "done", "unless": unless, "onlyif": "false",
	}})
	out := resources.Execute(t.Context(), e, &resources.Env{WorkDir: dir, Refresh: true, Noop: true})
	if out.Status != resources.StatusChanged || !out.Refreshed || exists(t, filepath.Join(dir, "count")) {
		t.Fatalf("noop refresh %+v", out)
	}
	out = resources.Execute(t.Context(), e, &resources.Env{WorkDir: dir, Refresh: true})
	if out.Status != resources.StatusChanged || !out.Refreshed {
		t.Fatalf("refresh %+v", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "count")); string(b) != "run\n" {
		t.Fatalf("command ran %q, want once", b)
	}
	// Without a refresh, creates holds again, and it was the re-check (not
	// the refresh) that ran the guards, if anything.
	if out := resources.Execute(t.Context(), e, &resources.Env{WorkDir: dir}); out.Status != resources.StatusStable {
		t.Fatalf("no refresh %+v", out)
	}
	if ran() != "" {
		t.Fatalf("guard ran %q: creates should have beaten it", ran())
	}
}

func TestLogOutputIsBounded(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	// 3 MB of output, then a last line.
	e := newExec(t, resources.Spec{Name: "head -c 3000000 /dev/zero | tr '\\0' a; echo; echo last line", Provider: "shell",
		Properties: map[string]any{"logoutput": true}})
	out := resources.Execute(t.Context(), e, &resources.Env{Logger: logger})
	if out.Status != resources.StatusChanged {
		t.Fatalf("outcome %+v", out)
	}
	_, output, _ := strings.Cut(out.Message, "\n")
	if len(output) > MaxOutputBytes+64 || !strings.HasPrefix(output, "[manifold: ") || !strings.Contains(output, " bytes of output truncated]\n") || !strings.HasSuffix(output, "\nlast line") {
		t.Fatalf("message of %d bytes: %.120q ... %q", len(out.Message), out.Message, out.Message[max(0, len(out.Message)-40):])
	}
	if !strings.Contains(logs.String(), "last line") || logs.Len() > 2*MaxOutputBytes {
		t.Fatalf("log of %d bytes", logs.Len())
	}

	// At the bound nothing is cut.
	at := strings.Repeat("x", MaxOutputBytes)
	if boundOutput(at) != at {
		t.Fatal("output of exactly MaxOutputBytes was cut")
	}
	if got := boundOutput(at + "y"); !strings.HasPrefix(got, "[manifold: 1 bytes of output truncated]\n") || !strings.HasSuffix(got, "y") {
		t.Fatalf("one byte over: %.60q", got)
	}

	// A failing command's error carries bounded output too.
	e = newExec(t, resources.Spec{Name: "head -c 100000 /dev/zero | tr '\\0' b >&2; exit 3", Provider: "shell"})
	out = resources.Execute(t.Context(), e, &resources.Env{})
	var exitErr *ExitError
	if !errors.As(out.Err, &exitErr) || len(exitErr.Stderr) > MaxOutputBytes+64 || !strings.HasPrefix(exitErr.Stderr, "[manifold: ") {
		t.Fatalf("outcome %+v", out)
	}
}

// TestTimeoutKillsProcessGroup: the resource's timeout (the deadline the
// worker puts on ctx) kills the command and the children it forked.
func TestTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	e := newExec(t, resources.Spec{Name: "sleep 300 & echo $! > " + pidFile + "; wait", Provider: "shell"})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	out := resources.Execute(ctx, e, &resources.Env{})
	if out.Status != resources.StatusFailed || !errors.Is(out.Err, context.DeadlineExceeded) {
		t.Fatalf("outcome %+v", out)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("took %v", elapsed)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
				return // dead, not yet reaped by init
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("forked child %d still alive after the timeout", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

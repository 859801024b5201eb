package resources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// MaxCommandOutput is how many bytes of stdout and of stderr OSRunner keeps
// per command. Longer output keeps its tail and starts with a truncation
// note.
const MaxCommandOutput = 1 << 20

// commandWaitDelay bounds how long OSRunner waits for a command's output
// pipes to close after the process exited or was killed (a background child
// may hold them open).
const commandWaitDelay = time.Second

// OSRunner runs commands as real processes with os/exec. It is the default
// CommandRunner.
//
// Each command starts in its own process group; when ctx is cancelled or its
// deadline passes the whole group is killed with SIGKILL, so children and
// grandchildren of the command die with it. Stdout and stderr are captured,
// each capped at MaxCommandOutput bytes (the tail is kept).
type OSRunner struct{}

var _ CommandRunner = OSRunner{}

// Run starts cmd and blocks until it exits or ctx is done.
//
// The environment is the process's own (os.Environ) plus cmd.Env; a non-empty
// cmd.Path replaces PATH and is where a program named without a slash is
// looked up (relative PATH entries are ignored). A non-zero exit is not an
// error: it is reported in CommandResult.ExitCode (128+n for a process killed
// by signal n). Run returns an error only when the command cannot start or
// ctx ended before it finished; the partial output is returned with it.
func (OSRunner) Run(ctx context.Context, c Command) (CommandResult, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return CommandResult{ExitCode: -1}, errors.New("run: empty command")
	}
	env := commandEnv(os.Environ(), c.Env, c.Path)
	prog, err := lookProgram(c.Argv[0], envValue(env, "PATH"), c.Dir)
	if err != nil {
		return CommandResult{ExitCode: -1}, fmt.Errorf("run %s: %w", c.Argv[0], err)
	}

	stdout := &tailBuffer{max: MaxCommandOutput}
	stderr := &tailBuffer{max: MaxCommandOutput}
	newCmd := func() *exec.Cmd {
		cmd := exec.CommandContext(ctx, prog, c.Argv[1:]...)
		cmd.Args = c.Argv
		cmd.Dir = c.Dir
		cmd.Env = env
		cmd.Stdin = c.Stdin
		cmd.Stdout = stdout
		cmd.Stderr = stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error {
			// The process is its group's leader: -pid addresses the group.
			err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			if errors.Is(err, syscall.ESRCH) {
				return os.ErrProcessDone
			}
			return err
		}
		cmd.WaitDelay = commandWaitDelay
		return cmd
	}
	// The reaper runs before the command does: started on the first
	// command's note, after the command, a worker killed while the
	// reaper was still starting (a fork and exec, milliseconds under
	// load) left that command's group behind.
	reaperStart()
	cmd, err := startRetryingBusy(ctx, newCmd)
	if err != nil {
		return CommandResult{ExitCode: -1}, fmt.Errorf("run %s: %w", c.Argv[0], err)
	}
	reaperNote('+', cmd.Process.Pid)
	waitErr := cmd.Wait()
	reaperNote('-', cmd.Process.Pid)
	res := CommandResult{
		ExitCode: exitCode(cmd.ProcessState),
		Stdout:   stdout.Bytes(),
		Stderr:   stderr.Bytes(),
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return res, fmt.Errorf("run %s: %w", c.Argv[0], context.Cause(ctx))
	}
	var exitErr *exec.ExitError
	switch {
	case waitErr == nil, errors.As(waitErr, &exitErr), errors.Is(waitErr, exec.ErrWaitDelay):
		// A non-zero exit is a result, not an error. ErrWaitDelay means the
		// command exited but something it started kept its output open.
		return res, nil
	default:
		return res, fmt.Errorf("run %s: %w", c.Argv[0], waitErr)
	}
}

// Text file busy: a program just written (a file resource's script, run by
// an exec resource next) cannot be executed while some process holds it
// open for writing, and every process forked meanwhile by any goroutine of
// this one holds it, from its fork to its exec (the descriptor is closed
// on exec, not before): with resources run concurrently, a worker's other
// commands make such windows. The start is tried again, the command not
// having run: maxBusyStarts times at most, 1 ms apart doubling to 64 ms
// (some 0.25 s in all), then the error is the command's.
const maxBusyStarts = 9

// busyStarts counts the starts tried again (tests).
var busyStarts atomic.Int64

// startRetryingBusy starts the command newCmd makes, making and starting
// another while the start fails with ETXTBSY (see maxBusyStarts) and ctx
// lasts.
func startRetryingBusy(ctx context.Context, newCmd func() *exec.Cmd) (*exec.Cmd, error) {
	delay := time.Millisecond
	for attempt := 1; ; attempt++ {
		cmd := newCmd()
		err := cmd.Start()
		if err == nil || !errors.Is(err, syscall.ETXTBSY) || attempt == maxBusyStarts {
			return cmd, err
		}
		busyStarts.Add(1)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		delay = min(2*delay, 64*time.Millisecond)
	}
}

// exitCode returns the process's exit code, or 128+signal when a signal
// ended it, or -1 when it is unknown.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// commandEnv returns base plus extra, with PATH replaced by path when path is
// not empty.
func commandEnv(base, extra []string, path string) []string {
	env := make([]string, 0, len(base)+len(extra)+1)
	for _, kv := range append(base[:len(base):len(base)], extra...) {
		if path != "" && strings.HasPrefix(kv, "PATH=") {
			continue
		}
		env = append(env, kv)
	}
	if path != "" {
		env = append(env, "PATH="+path)
	}
	return env
}

// envValue returns the last value of key in env, as os/exec would use it.
func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// lookProgram finds name in the directories of path, like exec.LookPath but
// against the command's PATH rather than this process's. A name containing a
// slash is returned as is (relative to dir when started). Relative PATH
// entries are skipped, as exec.LookPath refuses them too.
func lookProgram(name, path, dir string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w in PATH %q", exec.ErrNotFound, path)
}

// tailBuffer is an io.Writer that keeps the last max bytes written and counts
// what it dropped.
type tailBuffer struct {
	max     int
	buf     []byte
	dropped int64
}

// Write keeps the tail of everything written so far. It never fails.
func (b *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= b.max {
		b.dropped += int64(len(b.buf) + len(p) - b.max)
		b.buf = append(b.buf[:0], p[len(p)-b.max:]...)
		return n, nil
	}
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		// Compact only when the slack is large, so writes stay amortised O(1).
		if over >= b.max/4 {
			b.dropped += int64(over)
			b.buf = append(b.buf[:0], b.buf[over:]...)
		}
	}
	return n, nil
}

// Bytes returns the kept tail, prefixed with a note when output was dropped.
func (b *tailBuffer) Bytes() []byte {
	out := b.buf
	dropped := b.dropped
	if over := len(out) - b.max; over > 0 {
		dropped += int64(over)
		out = out[over:]
	}
	if dropped == 0 {
		return out
	}
	note := fmt.Sprintf("[manifold: %d bytes of output truncated]\n", dropped)
	return append([]byte(note), out...)
}

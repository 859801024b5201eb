package resources

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

	cmd := exec.CommandContext(ctx, prog, c.Argv[1:]...)
	cmd.Args = c.Argv
	cmd.Dir = c.Dir
	cmd.Env = env
	cmd.Stdin = c.Stdin
	stdout := &tailBuffer{max: MaxCommandOutput}
	stderr := &tailBuffer{max: MaxCommandOutput}
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

	if err := cmd.Start(); err != nil {
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

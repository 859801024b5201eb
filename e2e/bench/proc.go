package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// identity is the user the measured processes run as, and the owner and
// group every file resource names, so that both tools do the same work.
type identity struct {
	uid, gid     int
	owner, group string
	// switchUser is set when the harness runs as root and drops to uid/gid
	// for every child (CCM creates /etc/choria at start, and must not).
	switchUser bool
}

// unprivilegedUID is the uid and gid of nobody/nogroup on Debian-like and
// Red Hat-like systems.
const unprivilegedUID = 65534

// currentIdentity returns nobody/nogroup when the harness runs as root,
// else the current user and its primary group.
func currentIdentity() (identity, error) {
	id := identity{uid: os.Geteuid(), gid: os.Getegid()}
	if id.uid == 0 {
		id.uid, id.gid, id.switchUser = unprivilegedUID, unprivilegedUID, true
	}
	u, err := user.LookupId(strconv.Itoa(id.uid))
	if err != nil {
		return id, fmt.Errorf("bench: user of uid %d: %w", id.uid, err)
	}
	g, err := user.LookupGroupId(strconv.Itoa(id.gid))
	if err != nil {
		return id, fmt.Errorf("bench: group of gid %d: %w", id.gid, err)
	}
	id.owner, id.group = u.Username, g.Name
	return id, nil
}

// sample is one measured run of a child process.
type sample struct {
	// start is when the harness started the process (wall clock).
	start time.Time
	wall  time.Duration
	// rssKiB is the peak resident set size of the child (wait4's
	// ru_maxrss, in KiB on Linux).
	rssKiB int64
	// cpu is the child's user and system CPU time (GNU time's %U and %S,
	// or wait4's): a figure a loaded machine distorts less than wall time.
	cpu    time.Duration
	stdout []byte
	// stderr is what the child wrote on stderr (capped as stdout).
	stderr []byte
	// err is set when the process could not start, exited non-zero or
	// timed out; timeout tells the last apart.
	err     error
	timeout bool
}

// runner starts the measured processes: as the identity, with a clean
// environment, in their own process group, killed with the whole group
// when the timeout passes.
type runner struct {
	id   identity
	home string
	// timeBin is GNU time (`/usr/bin/time`), which reports the measured
	// process's own peak RSS. Without it the harness reads wait4's
	// ru_maxrss, which on Linux includes the harness's own peak RSS: Go
	// starts children with vfork, and exec records the peak of the memory
	// it replaces.
	timeBin string
	seq     atomic.Int64
	// profiles, when set, is where each run of the binary profiled writes
	// its CPU profile (Config.CPUProfiles).
	profiles, profiled string
}

// gnuTime is where GNU time is looked for.
const gnuTime = "/usr/bin/time"

// rssMethod says how peak RSS is measured.
func (r *runner) rssMethod() string {
	if r.timeBin != "" {
		return "GNU time's `%M`, the process's own peak"
	}
	return "wait4's `ru_maxrss`; no " + gnuTime + ", so a figure may be the harness's own peak when that is larger"
}

// errTimeout is the error of a sample whose process was killed at its
// timeout.
var errTimeout = errors.New("timeout")

// maxOutput bounds what is kept of a child's stdout and stderr.
const maxOutput = 64 << 20

// command prepares bin with args, dropping privileges when the harness is
// root: the same as `setpriv --reuid=65534 --regid=65534 --clear-groups env
// -i PATH=/usr/bin:/bin HOME=<home> bin args...`, done by the kernel calls
// Go makes between fork and exec.
func (r *runner) command(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + r.home}
	cmd.Dir = r.home
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if r.id.switchUser {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(r.id.uid), Gid: uint32(r.id.gid), Groups: []uint32{}}
	}
	return cmd
}

// run runs bin to completion or until timeout and measures it.
func (r *runner) run(ctx context.Context, timeout time.Duration, dir, bin string, args ...string) sample {
	return r.runEnv(ctx, timeout, dir, nil, bin, args...)
}

// runEnv is run with env (KEY=value) added to the clean environment.
func (r *runner) runEnv(ctx context.Context, timeout time.Duration, dir string, env []string, bin string, args ...string) sample {
	argv := append([]string{bin}, args...)
	rssFile := ""
	if r.timeBin != "" {
		rssFile = filepath.Join(r.home, fmt.Sprintf(".rss-%d", r.seq.Add(1)))
		defer os.Remove(rssFile)
		argv = append([]string{r.timeBin, "-f", "%U %S %M", "-o", rssFile}, argv...)
	}
	cmd := r.command(argv[0], argv[1:]...)
	cmd.Env = append(cmd.Env, env...)
	if r.profiles != "" && bin == r.profiled {
		cmd.Env = append(cmd.Env, "MANIFOLD_CPU_PROFILE="+filepath.Join(r.profiles, fmt.Sprintf("%d.pprof", r.seq.Add(1))))
	}
	if dir != "" {
		cmd.Dir = dir
	}
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return sample{err: fmt.Errorf("start %s: %w", bin, err)}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	timedOut := false
	select {
	case err = <-done:
	case <-ctx.Done():
		timedOut = true
		killGroup(cmd)
		err = <-done
	}
	s := sample{start: start, wall: time.Since(start), stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	if rssFile != "" {
		s.rssKiB, s.cpu = readTime(rssFile)
	} else if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			s.rssKiB = ru.Maxrss
		}
		s.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	switch {
	case timedOut:
		s.err, s.timeout = fmt.Errorf("%s %s: %w after %s", bin, strings.Join(args, " "), errTimeout, timeout), true
	case err != nil:
		s.err = fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, tail(stderr.Bytes(), stdout.Bytes()))
	}
	return s
}

// readTime reads the user and system seconds and the peak KiB GNU time
// wrote ("%U %S %M") as the last line of its output file (after a
// "Command exited with non-zero status" line, if any); zeros when there
// is none.
func readTime(path string) (rssKiB int64, cpu time.Duration) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0, 0
	}
	f = f[len(f)-3:]
	rssKiB, _ = strconv.ParseInt(f[2], 10, 64)
	for _, v := range f[:2] {
		if sec, err := strconv.ParseFloat(v, 64); err == nil {
			cpu += time.Duration(sec * float64(time.Second))
		}
	}
	return rssKiB, cpu
}

// killGroup kills the process group of a started command.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// tail returns the last lines of a failed child's output for an error
// message: stderr, else stdout.
func tail(stderr, stdout []byte) string {
	out := bytes.TrimSpace(stderr)
	if len(out) == 0 {
		out = bytes.TrimSpace(stdout)
	}
	const max = 600
	if len(out) > max {
		out = append([]byte("..."), out[len(out)-max:]...)
	}
	return string(out)
}

// capped is a buffer that keeps the first maxOutput bytes written.
type capped struct{ bytes.Buffer }

// Write keeps what fits and reports everything written.
func (c *capped) Write(p []byte) (int, error) {
	if room := maxOutput - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

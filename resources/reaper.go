package resources

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// A command's process group dies with the command when its context ends,
// but not when the process that started it is SIGKILLed: the group lives
// on, and the task is redelivered and runs a second time elsewhere. The
// reaper closes that gap: a small child process of its own (the manifold
// binary run with ReaperCommand) to which OSRunner reports every process
// group it starts and ends, over a pipe. When the parent dies, for any
// reason, the pipe closes and the reaper kills the groups still running.

// ReaperCommand is the hidden first argument that makes the manifold binary
// a reaper (see Reaper).
const ReaperCommand = "__reaper"

// reaperExe, when set (EnableReaper), is the binary started as the reaper.
var (
	reaperMu  sync.Mutex
	reaperExe string
	reaperIn  io.WriteCloser
)

// EnableReaper makes OSRunner register the process groups it starts with a
// reaper, started from exe on the first command.
func EnableReaper(exe string) {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	reaperExe = exe
}

// reaperNote tells the reaper that process group pgid started (+) or ended
// (-). Without a reaper, or when it cannot be started, it does nothing: the
// context's kill still ends groups while this process lives.
func reaperNote(sign byte, pgid int) {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	if !reaperStartLocked() {
		return
	}
	if _, err := fmt.Fprintf(reaperIn, "%c%d\n", sign, pgid); err != nil {
		reaperIn, reaperExe = nil, ""
	}
}

// reaperStart starts the reaper, if enabled and not started yet, so that
// it is running before a command's process group exists.
func reaperStart() {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	reaperStartLocked()
}

// reaperStartLocked starts the reaper if needed; false when there is
// none (not enabled, or it could not be started).
func reaperStartLocked() bool {
	if reaperExe == "" {
		return false
	}
	if reaperIn != nil {
		return true
	}
	cmd := exec.Command(reaperExe, ReaperCommand)
	in, err := cmd.StdinPipe()
	if err != nil {
		reaperExe = ""
		return false
	}
	// Its own process group: a kill of a command's group never reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		reaperExe = ""
		return false
	}
	go func() { _ = cmd.Wait() }()
	reaperIn = in
	return true
}

// Reaper is the reaper process: it reads "+PGID" and "-PGID" lines from r
// and, at end of input (its parent gone), kills every group still
// registered with SIGKILL. It returns the exit code.
func Reaper(r io.Reader) int {
	groups := map[int]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return 0
}

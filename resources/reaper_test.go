package resources

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// The reaper kills the process groups still registered when its input
// ends (its parent died), and leaves alone those that were unregistered.
func TestReaperKillsRegisteredGroups(t *testing.T) {
	start := func() *exec.Cmd {
		cmd := exec.Command("/bin/sh", "-c", "sleep 600 & wait")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		return cmd
	}
	registered, unregistered := start(), start()
	r, w := io.Pipe()
	done := make(chan int)
	go func() { done <- Reaper(r) }()
	fmt.Fprintf(w, "+%d\n+%d\n-%d\n", registered.Process.Pid, unregistered.Process.Pid, unregistered.Process.Pid)
	w.Close() // the parent is gone
	<-done

	waited := make(chan error, 1)
	go func() { waited <- registered.Wait() }()
	select {
	case err := <-waited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the registered group ended with %v, want SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the registered group is still running")
	}
	if err := syscall.Kill(-unregistered.Process.Pid, 0); err != nil {
		t.Fatalf("the unregistered group was killed: %v", err)
	}
}

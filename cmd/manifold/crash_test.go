package main

import (
	"errors"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

// crashEnv makes the test binary run main with a hook that crashes the
// way the Go runtime exits 2 from: a panic nobody recovers in another
// goroutine, or a stack overflow.
const crashEnv = "MANIFOLD_TEST_CRASH"

func TestMain(m *testing.M) {
	if args := os.Getenv(mainArgsEnv); args != "" {
		os.Args = append([]string{"manifold"}, strings.Split(args, "\x1f")...)
		main()
		return
	}
	switch os.Getenv(crashEnv) {
	case "":
		os.Exit(m.Run())
	case "goroutine-panic":
		testHook = func() {
			go func() { panic("boom in a background goroutine") }()
			select {}
		}
	case "stack-overflow":
		testHook = func() {
			debug.SetMaxStack(1 << 20) // overflow in a moment, not at 1 GB
			go func() { recurse(0) }()
			select {}
		}
	}
	// No core file from the test's crash.
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	os.Args = []string{"manifold", "version"}
	main()
}

func recurse(n int) int { return recurse(n+1) + 1 }

// A crash in any goroutine, which the Go runtime ends with status 2 (an
// invalid manifest, to scripts), aborts the process instead, with the
// stacks on stderr.
func TestCrashIsNeverExit2(t *testing.T) {
	for _, kind := range []struct{ name, want string }{
		{"goroutine-panic", "panic: boom in a background goroutine"},
		{"stack-overflow", "stack overflow"},
	} {
		t.Run(kind.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashEnv+"="+kind.name)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("the crashing process did not end")
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("want a crash, got %v; stderr:\n%s", err, stderr.String())
			}
			if exit.ExitCode() == 2 {
				t.Fatalf("a crash exited 2 (an invalid manifest); stderr:\n%.2000s", stderr.String())
			}
			ws := exit.Sys().(syscall.WaitStatus)
			if !ws.Signaled() || ws.Signal() != syscall.SIGABRT {
				t.Fatalf("want death by SIGABRT, got %v", exit)
			}
			if !strings.Contains(stderr.String(), kind.want) {
				t.Fatalf("stderr lacks %q:\n%.2000s", kind.want, stderr.String())
			}
		})
	}
}

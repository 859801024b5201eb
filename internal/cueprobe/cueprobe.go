// Package cueprobe evaluates manifests written in CUE in a child process
// bounded in time and memory (see schemas.CUEProbe): the manifold binary
// runs itself with the hidden command Command.
package cueprobe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/manifold-run/manifold/schemas"
)

// Command is the hidden first argument that makes the binary a probe.
const Command = "__cue-probe"

// MemoryLimit bounds the probe's address space.
const MemoryLimit = 2 << 30

// Env names the environment variable that sets the probe's time limit (a
// Go duration); schemas.DefaultCUETimeout when unset.
const Env = "MANIFOLD_CUE_TIMEOUT"

// Install makes schemas.CUEProbe run this binary as a probe. It returns an
// error for a bad MANIFOLD_CUE_TIMEOUT.
func Install() error {
	timeout := schemas.DefaultCUETimeout
	if v := os.Getenv(Env); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s=%q: want a positive duration such as 10s", Env, v)
		}
		timeout = d
	}
	exe, err := os.Executable()
	if err != nil {
		return nil // no probe: evaluate in process
	}
	schemas.CUEProbe = func(filename string, src []byte) error { return probe(exe, timeout, filename, src) }
	return nil
}

func probe(exe string, timeout time.Duration, filename string, src []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, Command, filename)
	cmd.Stdin = bytes.NewReader(src)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("%s: evaluating the CUE manifest took longer than %s (comprehensions producing too many resources?); %s raises the limit",
			filename, timeout, Env)
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		return fmt.Errorf("%s: %s", filename, strings.TrimSpace(out.String()))
	case errors.As(err, &exit):
		// CUE's own errors (syntax, conflicts) are reported with positions
		// by the evaluation in process; a crash (the memory bound) is not.
		if exit.ExitCode() == 4 {
			return nil
		}
		return fmt.Errorf("%s: evaluating the CUE manifest failed (memory bound %d MiB?): %s", filename, MemoryLimit>>20, lastLine(out.String()))
	default:
		return nil // the probe could not start: evaluate in process
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// Child is the probe process: it evaluates the CUE source on stdin and
// exits 0 when it evaluated within the bounds, 3 (with the reason on
// stdout) when it declares more resources than a manifest may, 4 when CUE
// reports errors (the caller reports them with positions).
func Child(stdin io.Reader, stdout io.Writer, filename string) int {
	_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: MemoryLimit, Max: MemoryLimit})
	src, err := io.ReadAll(io.LimitReader(stdin, schemas.MaxManifestBytes+1))
	if err != nil {
		return 4
	}
	v := cuecontext.New().CompileBytes(src, cue.Filename(filename))
	if v.Err() != nil {
		return 4
	}
	n := 0
	for _, path := range []string{"resources", "ccm.resources"} {
		list := v.LookupPath(cue.ParsePath(path))
		if !list.Exists() {
			continue
		}
		it, err := list.List()
		if err != nil {
			return 4
		}
		for it.Next() {
			if n++; n > schemas.MaxResources {
				fmt.Fprintf(stdout, "more than %d resources (the limit per manifest); split it with apply resources\n", schemas.MaxResources)
				return 3
			}
		}
	}
	if err := v.Validate(); err != nil {
		return 4
	}
	return 0
}

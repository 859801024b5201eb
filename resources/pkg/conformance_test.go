package pkg

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/conformance"
)

// dpkgHost is a CommandRunner standing in for a Debian host with one
// package, sl, that answers with the outputs recorded from the real tools
// for the state it is in, and changes state on install and remove.
type dpkgHost struct {
	t         *testing.T
	mu        sync.Mutex
	installed bool
}

func (h *dpkgHost) LookPath(name string) (string, error) { return "/usr/bin/" + name, nil }

func (h *dpkgHost) Run(_ context.Context, c resources.Command) (resources.CommandResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case slices.Equal(c.Argv, dq("sl")):
		if h.installed {
			return resources.CommandResult{Stdout: []byte(out(h.t, "apt/dpkg-query-sl-installed.stdout"))}, nil
		}
		return resources.CommandResult{ExitCode: 1, Stderr: []byte(out(h.t, "apt/dpkg-query-sl-absent.stderr"))}, nil
	case slices.Equal(c.Argv, cat(aptOpts, "install", "sl")):
		h.installed = true
		return resources.CommandResult{Stdout: []byte(out(h.t, "apt/apt-get-install-sl.stdout"))}, nil
	case slices.Equal(c.Argv, cat(aptRm, "sl")):
		h.installed = false
		return resources.CommandResult{Stdout: []byte(out(h.t, "apt/apt-get-remove-sl.stdout"))}, nil
	}
	return resources.CommandResult{ExitCode: -1}, fmt.Errorf("unexpected command %v", c.Argv)
}

func TestConformanceRecorded(t *testing.T) {
	t.Parallel()
	for _, ensure := range []string{"present", "absent"} {
		t.Run(ensure, func(t *testing.T) {
			t.Parallel()
			host := &dpkgHost{t: t, installed: ensure == "absent"}
			conformance.Run(t, conformance.Case{
				New: func(t *testing.T) (resources.Resource, *resources.Env) {
					return newPackage(t, "sl", ensure, "apt"), &resources.Env{Runner: host}
				},
				Snapshot: func(t *testing.T) string {
					host.mu.Lock()
					defer host.mu.Unlock()
					return fmt.Sprint("installed=", host.installed)
				},
			})
		})
	}
}

// TestRealAptInstallRemove installs and removes a tiny real package (sl,
// 13 kB) with apt through the real runner, running the conformance suite
// both ways. It skips itself where apt, root or the package registry is
// missing, or where sl is already installed.
func TestRealAptInstallRemove(t *testing.T) {
	const name = "sl"
	requireRealApt(t, name)

	env := &resources.Env{Runner: resources.OSRunner{}}
	snapshot := func(t *testing.T) string {
		out, _ := exec.Command("dpkg-query", "-W", "-f=${Version} ${db:Status-Status}", name).Output()
		return string(out)
	}
	t.Run("present", func(t *testing.T) {
		conformance.Run(t, conformance.Case{
			New: func(t *testing.T) (resources.Resource, *resources.Env) {
				return newPackage(t, name, "present", ""), env
			},
			Snapshot: snapshot,
		})
		if _, err := exec.LookPath("/usr/games/sl"); err != nil {
			t.Fatalf("sl installed but its program is missing: %v", err)
		}
	})
	t.Run("absent", func(t *testing.T) {
		conformance.Run(t, conformance.Case{
			New: func(t *testing.T) (resources.Resource, *resources.Env) {
				return newPackage(t, name, "absent", "apt"), env
			},
			Snapshot: snapshot,
		})
		if got := snapshot(t); strings.HasSuffix(got, " installed") {
			t.Fatalf("still installed: %q", got)
		}
	})
}

// requireRealApt skips the test unless this is a Debian host where it runs
// as root, none of names is installed and apt can fetch them all; it
// removes them when the test ends.
func requireRealApt(t *testing.T, names ...string) {
	t.Helper()
	for _, p := range []string{"apt-get", "apt-cache", "dpkg-query"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s not found: not a Debian host", p)
		}
	}
	if out, _ := exec.Command("id", "-u").Output(); strings.TrimSpace(string(out)) != "0" {
		t.Skip("installing packages needs root")
	}
	for _, name := range names {
		if out, _ := exec.Command("dpkg-query", "-W", "-f=${db:Status-Status}", name).Output(); string(out) == "installed" {
			t.Skipf("%s is installed on this host; the test needs it absent", name)
		}
	}
	// Reaching the registry: download the packages without installing them.
	dl := exec.Command("apt-get", append([]string{"-q", "-y", "--download-only", "install"}, names...)...)
	dl.Env = append(dl.Environ(), aptEnv...)
	if out, err := dl.CombinedOutput(); err != nil {
		t.Skipf("apt cannot fetch %v from its registry (run apt-get update?): %v\n%s", names, err, out)
	}
	t.Cleanup(func() {
		rm := exec.Command("apt-get", append([]string{"-q", "-y", "remove"}, names...)...)
		rm.Env = append(rm.Environ(), aptEnv...)
		_ = rm.Run()
	})
}

// commandLog is the real runner, remembering what it ran.
type commandLog struct {
	mu    sync.Mutex
	argvs [][]string
}

func (l *commandLog) Run(ctx context.Context, c resources.Command) (resources.CommandResult, error) {
	l.mu.Lock()
	l.argvs = append(l.argvs, c.Argv)
	l.mu.Unlock()
	return resources.OSRunner{}.Run(ctx, c)
}

// TestRealAptBatch installs two tiny real packages (hello, tree) in one
// apt-get install and removes them in one apt-get remove, through
// resources.Batch and the real runner. It skips itself as
// TestRealAptInstallRemove does.
func TestRealAptBatch(t *testing.T) {
	names := []string{"hello", "tree"}
	requireRealApt(t, names...)
	for _, ensure := range []string{"present", "absent"} {
		log := &commandLog{}
		env := &resources.Env{Runner: log}
		ctx := context.Background()
		var b resources.Batch
		for _, n := range names {
			b.Check(ctx, newPackage(t, n, ensure, "").(*Package), env)
		}
		if err := b.Apply(ctx); err != nil {
			t.Fatalf("%s: %v", ensure, err)
		}
		for i, n := range names {
			if o := b.Finish(ctx, i); o.Status != resources.StatusChanged {
				t.Fatalf("%s %s: %+v", ensure, n, o)
			}
		}
		var aptGets [][]string
		for _, a := range log.argvs {
			if a[0] == "apt-get" {
				aptGets = append(aptGets, a)
			}
		}
		if len(aptGets) != 1 || !slices.Equal(aptGets[0][len(aptGets[0])-2:], names) {
			t.Fatalf("%s: apt-get commands %q, want one naming %v", ensure, aptGets, names)
		}
		for _, n := range names {
			out, _ := exec.Command("dpkg-query", "-W", "-f=${db:Status-Status}", n).Output()
			if (string(out) == "installed") != (ensure == "present") {
				t.Fatalf("%s: %s is %q", ensure, n, out)
			}
		}
	}
}

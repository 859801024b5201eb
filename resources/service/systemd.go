package service

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/manifold-run/manifold/resources"
)

// systemdRunDir exists when the host was booted with systemd (sd_booted).
const systemdRunDir = "/run/systemd/system"

// maxErrorOutput bounds how much of systemctl's output an error quotes.
const maxErrorOutput = 512

// systemdBooted reports whether systemd is the running init system.
func systemdBooted() bool {
	fi, err := os.Stat(systemdRunDir)
	return err == nil && fi.IsDir()
}

// newProviders returns the provider set with booted deciding whether
// systemd runs here (tests replace it).
func newProviders(booted func() bool) *resources.Providers[Manager] {
	return resources.NewProviders(Type, resources.Provider[Manager]{
		Name: "systemd",
		Manageable: func(_ context.Context, env *resources.Env) (int, error) {
			if !booted() {
				return 0, fmt.Errorf("systemd is not running on this host (no %s)", systemdRunDir)
			}
			if err := resources.RequirePrograms(env, "systemctl"); err != nil {
				return 0, err
			}
			return 1, nil
		},
		New: func(env *resources.Env) Manager {
			r := env.Runner
			if r == nil {
				r = resources.OSRunner{}
			}
			return &systemd{run: r}
		},
	})
}

// systemd drives systemctl for one execution.
type systemd struct {
	run resources.CommandRunner
}

func (s *systemd) systemctl(ctx context.Context, args ...string) (resources.CommandResult, error) {
	argv := append([]string{"systemctl"}, args...)
	res, err := s.run.Run(ctx, resources.Command{Argv: argv})
	if err != nil {
		return res, fmt.Errorf("systemctl %s: %w", strings.Join(args, " "), err)
	}
	return res, nil
}

// Status asks systemctl show (LoadState, NeedDaemonReload), is-active and
// is-enabled.
func (s *systemd) Status(ctx context.Context, name string) (Unit, error) {
	res, err := s.systemctl(ctx, "show", "-p", "LoadState", "-p", "NeedDaemonReload", name)
	if err != nil {
		return Unit{}, err
	}
	if res.ExitCode != 0 {
		return Unit{}, failed(res, "show", name)
	}
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(res.Stdout))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			props[k] = v
		}
	}
	var u Unit
	switch props["LoadState"] {
	case "loaded":
	case "masked":
		u.Masked = true
	case "not-found":
		return Unit{}, fmt.Errorf("%s: %w", name, ErrUnitNotFound)
	case "":
		return Unit{}, fmt.Errorf("systemctl show %s: no LoadState in %q", name, res.Stdout)
	default:
		return Unit{}, fmt.Errorf("%s: unit load state %s", name, props["LoadState"])
	}
	u.NeedReload = props["NeedDaemonReload"] == "yes"

	// is-active and is-enabled exit non-zero for "inactive" and "disabled":
	// the word they print is the answer.
	res, err = s.systemctl(ctx, "is-active", name)
	if err != nil {
		return Unit{}, err
	}
	switch state := strings.TrimSpace(string(res.Stdout)); state {
	case "active", "activating", "reloading", "refreshing":
		u.Running = true
	case "inactive", "failed", "deactivating", "maintenance":
	default:
		return Unit{}, fmt.Errorf("systemctl is-active %s: unexpected %q", name, state)
	}
	res, err = s.systemctl(ctx, "is-enabled", name)
	if err != nil {
		return Unit{}, err
	}
	u.EnableState = strings.TrimSpace(string(res.Stdout))
	switch u.EnableState {
	case "enabled", "enabled-runtime":
		u.Enabled, u.Toggleable = true, true
	case "disabled":
		u.Toggleable = true
	case "linked", "linked-runtime", "masked", "masked-runtime":
	case "static", "indirect", "generated", "transient", "alias":
		u.Enabled = u.EnableState != "indirect"
	default:
		return Unit{}, fmt.Errorf("systemctl is-enabled %s: unexpected %q: %s", name, u.EnableState, reason(res))
	}
	return u, nil
}

// Reload runs systemctl daemon-reload.
func (s *systemd) Reload(ctx context.Context) error {
	res, err := s.systemctl(ctx, "daemon-reload")
	if err == nil && res.ExitCode != 0 {
		err = failed(res, "daemon-reload", "")
	}
	return err
}

// Do runs systemctl <action> <name>.
func (s *systemd) Do(ctx context.Context, action, name string) error {
	res, err := s.systemctl(ctx, action, name)
	if err == nil && res.ExitCode != 0 {
		err = failed(res, action, name)
	}
	return err
}

func failed(res resources.CommandResult, action, name string) error {
	return fmt.Errorf("%w: systemctl %s exited %d: %s", ErrCommandFailed, strings.TrimSpace(action+" "+name), res.ExitCode, reason(res))
}

func reason(res resources.CommandResult) string {
	out := bytes.TrimSpace(res.Stderr)
	if len(out) == 0 {
		out = bytes.TrimSpace(res.Stdout)
	}
	if len(out) > maxErrorOutput {
		out = append([]byte("…"), out[len(out)-maxErrorOutput:]...)
	}
	if len(out) == 0 {
		return "no output"
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(string(out), "\n", " | ")), " ")
}

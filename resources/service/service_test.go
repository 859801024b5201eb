package service

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

func out(t *testing.T, name string) string {
	t.Helper()
	if name == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// status returns the three steps of one Status call on nginx.
func status(t *testing.T, show, active, enabled string) []resources.ReplayStep {
	t.Helper()
	exitActive := 0
	if !strings.HasPrefix(active, "is-active-active") {
		exitActive = 3
	}
	exitEnabled := 0
	if enabled != "is-enabled-enabled.stdout" && enabled != "is-enabled-static.stdout" {
		exitEnabled = 1
	}
	return []resources.ReplayStep{
		{Argv: []string{"systemctl", "show", "-p", "LoadState", "-p", "NeedDaemonReload", "nginx"}, Stdout: out(t, show)},
		{Argv: []string{"systemctl", "is-active", "nginx"}, ExitCode: exitActive, Stdout: out(t, active)},
		{Argv: []string{"systemctl", "is-enabled", "nginx"}, ExitCode: exitEnabled, Stdout: out(t, enabled)},
	}
}

func action(t *testing.T, exit int, stderr string, args ...string) []resources.ReplayStep {
	return []resources.ReplayStep{{Argv: append([]string{"systemctl"}, args...), ExitCode: exit, Stderr: out(t, stderr)}}
}

func steps(parts ...[]resources.ReplayStep) []resources.ReplayStep { return slices.Concat(parts...) }

// booted is the provider set of a host running systemd.
var booted = newProviders(func() bool { return true })

func newService(t *testing.T, ensure string, enable *bool) *Service {
	t.Helper()
	props := map[string]any{}
	if enable != nil {
		props["enable"] = *enable
	}
	r, err := New(resources.Spec{Type: Type, Name: "nginx", Ensure: ensure, Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	s := r.(*Service)
	s.providers = booted
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	return s
}

func ptr(b bool) *bool { return &b }

func TestServiceReplay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		ensure  string
		enable  *bool
		refresh bool
		steps   func(t *testing.T) []resources.ReplayStep
		status  resources.Status
		message string
		errIs   error
	}{
		{
			name: "running and enabled is stable", ensure: "running", enable: ptr(true),
			steps: func(t *testing.T) []resources.ReplayStep {
				return status(t, "show-loaded.stdout", "is-active-active.stdout", "is-enabled-enabled.stdout")
			},
			status: resources.StatusStable, message: "running, enabled",
		},
		{
			name: "stopped and disabled: enable and start", ensure: "", enable: ptr(true),
			steps: func(t *testing.T) []resources.ReplayStep {
				s := status(t, "show-loaded.stdout", "is-active-inactive.stdout", "is-enabled-disabled.stdout")
				return steps(s, s, action(t, 0, "enable-nginx.stderr", "enable", "nginx"), action(t, 0, "", "start", "nginx"),
					status(t, "show-loaded.stdout", "is-active-active.stdout", "is-enabled-enabled.stdout"))
			},
			status: resources.StatusChanged, message: "enable, start",
		},
		{
			name: "running: stop and disable", ensure: "stopped", enable: ptr(false),
			steps: func(t *testing.T) []resources.ReplayStep {
				s := status(t, "show-loaded.stdout", "is-active-active.stdout", "is-enabled-enabled.stdout")
				return steps(s, s, action(t, 0, "disable-nginx.stderr", "disable", "nginx"), action(t, 0, "", "stop", "nginx"),
					status(t, "show-loaded.stdout", "is-active-inactive.stdout", "is-enabled-disabled.stdout"))
			},
			status: resources.StatusChanged, message: "disable, stop",
		},
		{
			name: "enable unset leaves enablement alone", ensure: "running",
			steps: func(t *testing.T) []resources.ReplayStep {
				return status(t, "show-loaded.stdout", "is-active-active.stdout", "is-enabled-disabled.stdout")
			},
			status: resources.StatusStable, message: "running, disabled",
		},
		{
			name: "failed unit is started", ensure: "running",
			steps: func(t *testing.T) []resources.ReplayStep {
				s := status(t, "show-loaded.stdout", "is-active-failed.stdout", "is-enabled-enabled.stdout")
				return steps(s, s, action(t, 0, "", "start", "nginx"),
					status(t, "show-loaded.stdout", "is-active-active.stdout", "is-enabled-enabled.stdout"))
			},
			status: resources.StatusChanged, message: "start",
		},
		{
			name: "changed unit files are reloaded before the start", ensure: "running",
			steps: func(t *testing.T) []resources.ReplayStep {
				s := status(t, "show-needs-reload.stdout", "is-active-inactive.stdout", "is-enabled-enabled.stdout")
				return steps(s, s, action(t, 0, "", "daemon-reload"), action(t, 0, "", "start", "nginx"),
					status(t, "show-loaded.stdout", "is-active-active.stdout", "is-enabled-enabled.stdout"))
			},
			status: resources.StatusChanged, message: "daemon-reload, start",
		},
		{
			name: "refresh restarts a running service", ensure: "running", refresh: true,
			steps: func(t *testing.T) []resources.ReplayStep {
				s := status(t, "show-loaded.stdout", "is-active-active.stdout", "is-enabled-enabled.stdout")
				return steps(s, s, action(t, 0, "", "restart", "nginx"), s)
			},
			status: resources.StatusChanged, message: "restart",
		},
		{
			name: "refresh of a stopped service starts it once, no restart", ensure: "running", refresh: true,
			steps: func(t *testing.T) []resources.ReplayStep {
				s := status(t, "show-loaded.stdout", "is-active-inactive.stdout", "is-enabled-enabled.stdout")
				return steps(s, s, action(t, 0, "", "start", "nginx"),
					status(t, "show-loaded.stdout", "is-active-active.stdout", "is-enabled-enabled.stdout"))
			},
			status: resources.StatusChanged, message: "start",
		},
		{
			name: "refresh of a service that should be stopped is ignored", ensure: "stopped", refresh: true,
			steps: func(t *testing.T) []resources.ReplayStep {
				return status(t, "show-loaded.stdout", "is-active-inactive.stdout", "is-enabled-disabled.stdout")
			},
			status: resources.StatusStable, message: "stopped, disabled",
		},
		{
			name: "a failing start reports systemd's hint", ensure: "running",
			steps: func(t *testing.T) []resources.ReplayStep {
				s := status(t, "show-loaded.stdout", "is-active-inactive.stdout", "is-enabled-enabled.stdout")
				return steps(s, s, action(t, 1, "start-nginx-failed.stderr", "start", "nginx"))
			},
			status: resources.StatusFailed, errIs: ErrCommandFailed, message: `apply: start: systemctl failed: systemctl start nginx exited 1: Job for nginx.service failed because the control process exited with error code. | See "systemctl status nginx.service" and "journalctl -xeu nginx.service" for details.`,
		},
		{
			name: "unknown unit", ensure: "running",
			steps: func(t *testing.T) []resources.ReplayStep {
				return status(t, "show-not-found.stdout", "", "")[:1]
			},
			status: resources.StatusFailed, errIs: ErrUnitNotFound,
		},
		{
			name: "masked unit cannot be started", ensure: "running",
			steps: func(t *testing.T) []resources.ReplayStep {
				return status(t, "show-masked.stdout", "is-active-inactive.stdout", "is-enabled-masked.stdout")
			},
			status: resources.StatusFailed, errIs: ErrUnitMasked,
		},
		{
			name: "static unit cannot be disabled", ensure: "running", enable: ptr(false),
			steps: func(t *testing.T) []resources.ReplayStep {
				return status(t, "show-loaded.stdout", "is-active-active.stdout", "is-enabled-static.stdout")
			},
			status: resources.StatusFailed, errIs: ErrNotToggleable,
		},
		{
			name: "static unit with enable true is stable", ensure: "running", enable: ptr(true),
			steps: func(t *testing.T) []resources.ReplayStep {
				return status(t, "show-loaded.stdout", "is-active-active.stdout", "is-enabled-static.stdout")
			},
			status: resources.StatusStable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runner := resources.NewReplayRunner(tt.steps(t)...)
			o := resources.Execute(context.Background(), newService(t, tt.ensure, tt.enable), &resources.Env{Runner: runner, Refresh: tt.refresh})
			if o.Status != tt.status {
				t.Fatalf("status %s, want %s: %s (%v)", o.Status, tt.status, o.Message, o.Err)
			}
			if tt.message != "" && o.Message != tt.message {
				t.Errorf("message %q, want %q", o.Message, tt.message)
			}
			if tt.errIs != nil && !errors.Is(o.Err, tt.errIs) {
				t.Errorf("err %v, want %v", o.Err, tt.errIs)
			}
			if err := runner.Verify(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestServiceNoop: noop runs only the read-only queries, refresh included.
func TestServiceNoop(t *testing.T) {
	t.Parallel()
	runner := resources.NewReplayRunner(status(t, "show-needs-reload.stdout", "is-active-active.stdout", "is-enabled-disabled.stdout")...)
	o := resources.Execute(context.Background(), newService(t, "running", ptr(true)), &resources.Env{Runner: runner, Noop: true, Refresh: true})
	if o.Status != resources.StatusChanged || !o.Noop || o.Message != "would daemon-reload, enable and refresh" {
		t.Fatalf("%+v", o)
	}
	for _, c := range runner.Calls() {
		if !slices.Contains([]string{"show", "is-active", "is-enabled"}, c.Argv[1]) {
			t.Fatalf("noop ran %v", c.Argv)
		}
	}
}

func TestServiceValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, ensure, provider string
		ok                     bool
	}{
		{name: "nginx", ok: true},
		{name: "getty@tty1.service", ok: true},
		{name: "systemd-journald", ensure: "stopped", ok: true},
		{name: strings.Repeat("a", MaxName), ok: true},
		{name: strings.Repeat("a", MaxName+1)},
		{name: "nginx; reboot"},
		{name: "$(id)"},
		{name: "-H"},
		{name: ""},
		{name: "nginx", ensure: "restarted"},
		{name: "nginx", provider: "systemd", ok: true},
		{name: "nginx", provider: "sysvinit"},
	} {
		r, err := New(resources.Spec{Type: Type, Name: tt.name, Ensure: tt.ensure, Provider: tt.provider})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(); (err == nil) != tt.ok {
			t.Errorf("%q ensure %q provider %q: %v", tt.name, tt.ensure, tt.provider, err)
		}
	}
	if _, err := New(resources.Spec{Type: Type, Name: "nginx", Properties: map[string]any{"enable": "yes"}}); err == nil {
		t.Fatal("enable: \"yes\" accepted")
	}
}

// TestServiceWithoutSystemd runs the real provider set: on a host not
// booted with systemd (this build host) the resource fails clearly.
func TestServiceWithoutSystemd(t *testing.T) {
	t.Parallel()
	if systemdBooted() {
		t.Skip("this host runs systemd")
	}
	r, err := New(resources.Spec{Type: Type, Name: "nginx"})
	if err != nil {
		t.Fatal(err)
	}
	o := resources.Execute(context.Background(), r, &resources.Env{Runner: resources.OSRunner{}})
	if o.Status != resources.StatusFailed || !errors.Is(o.Err, resources.ErrNoSuitableProvider) ||
		!strings.Contains(o.Err.Error(), "systemd is not running on this host (no /run/systemd/system)") {
		t.Fatalf("%+v", o)
	}
}

// TestServiceNoopAssumedPackage: in noop, a unit that does not exist yet
// but whose package the run installs would be enabled and started (it
// failed with "unit not found"); outside noop, or with another package
// assumed, the unit's absence is still an error.
func TestServiceNoopAssumedPackage(t *testing.T) {
	t.Parallel()
	notFound := func() *resources.ReplayRunner {
		return resources.NewReplayRunner(status(t, "show-not-found.stdout", "", "")[:1]...)
	}
	runner := notFound()
	o := resources.Execute(context.Background(), newService(t, "running", ptr(true)),
		&resources.Env{Runner: runner, Noop: true, Assume: &resources.Assumed{Packages: []string{"nginx"}}})
	if o.Status != resources.StatusChanged || !o.Noop || !strings.Contains(o.Message, "enable, start") ||
		!strings.Contains(o.Message, "package nginx") {
		t.Fatalf("%+v", o)
	}
	if err := runner.Verify(); err != nil {
		t.Error(err)
	}
	o = resources.Execute(context.Background(), newService(t, "stopped", nil),
		&resources.Env{Runner: notFound(), Noop: true, Assume: &resources.Assumed{Packages: []string{"nginx"}}})
	if o.Status != resources.StatusStable {
		t.Fatalf("stopped, assumed package: %+v", o)
	}
	for _, env := range []*resources.Env{
		{Noop: true, Assume: &resources.Assumed{Packages: []string{"apache2"}}},
		{Noop: false, Assume: &resources.Assumed{Packages: []string{"nginx"}}},
	} {
		env.Runner = notFound()
		o = resources.Execute(context.Background(), newService(t, "running", nil), env)
		if o.Status != resources.StatusFailed || !errors.Is(o.Err, ErrUnitNotFound) {
			t.Fatalf("noop %v, assumed %v: %+v", env.Noop, env.Assume.Packages, o)
		}
	}
}

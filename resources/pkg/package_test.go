package pkg

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

// out reads a recorded output from testdata ("" for none).
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

func step(t *testing.T, exit int, stdout, stderr string, argv ...string) resources.ReplayStep {
	t.Helper()
	return resources.ReplayStep{Argv: argv, ExitCode: exit, Stdout: out(t, stdout), Stderr: out(t, stderr)}
}

var (
	aptOpts  = []string{"apt-get", "-y", "-q", "-o", "DPkg::Lock::Timeout=300", "-o", "DPkg::Options::=--force-confold"}
	aptRm    = []string{"apt-get", "-y", "-q", "-o", "DPkg::Lock::Timeout=300", "remove"}
	rpmQuery = []string{"rpm", "-q", "--queryformat", rpmQueryFormat}
)

func dq(name string) []string  { return []string{"dpkg-query", "-W", dpkgQueryFormat, name} }
func pol(name string) []string { return []string{"apt-cache", "policy", name} }
func rpmq(name string) []string {
	return append(slices.Clone(rpmQuery), name)
}
func cat(a []string, b ...string) []string { return append(slices.Clone(a), b...) }

func newPackage(t *testing.T, name, ensure, provider string) resources.Resource {
	t.Helper()
	r, err := New(resources.Spec{Type: Type, Name: name, Ensure: ensure, Provider: provider})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	return r
}

// aptHost is a replay runner on a Debian host: apt's programs are found,
// dnf's are not.
func aptHost(steps ...resources.ReplayStep) *resources.ReplayRunner {
	r := resources.NewReplayRunner(steps...)
	r.SetPrograms("apt-get", "apt-cache", "dpkg-query")
	return r
}

func dnfHost(steps ...resources.ReplayStep) *resources.ReplayRunner {
	r := resources.NewReplayRunner(steps...)
	r.SetPrograms("dnf", "rpm")
	return r
}

func TestPackageReplay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, pkg, ensure string
		host              func(...resources.ReplayStep) *resources.ReplayRunner
		steps             func(t *testing.T) []resources.ReplayStep
		status            resources.Status
		message           string
		errText           string
		errIs             error
		// dup is how many leading steps (the check's queries) run twice:
		// once for the check, once more in apply, which re-reads the state
		// before changing it.
		dup int
	}{
		{
			name: "apt present installs", dup: 1, pkg: "sl", ensure: "present", host: aptHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{
					step(t, 1, "", "apt/dpkg-query-sl-absent.stderr", dq("sl")...),
					step(t, 0, "apt/apt-get-install-sl.stdout", "apt/apt-get-install-sl.stderr", cat(aptOpts, "install", "sl")...),
					step(t, 0, "apt/dpkg-query-sl-installed.stdout", "", dq("sl")...),
				}
			},
			status: resources.StatusChanged, message: "installed",
		},
		{
			name: "apt present already installed", pkg: "jq", ensure: "", host: aptHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{step(t, 0, "apt/dpkg-query-jq.stdout", "", dq("jq")...)}
			},
			status: resources.StatusStable, message: "installed 1.6-2.1+deb12u1",
		},
		{
			name: "apt absent removes", dup: 1, pkg: "sl", ensure: "absent", host: aptHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{
					step(t, 0, "apt/dpkg-query-sl-installed.stdout", "", dq("sl")...),
					step(t, 0, "apt/apt-get-remove-sl.stdout", "", cat(aptRm, "sl")...),
					step(t, 1, "", "apt/dpkg-query-sl-absent.stderr", dq("sl")...),
				}
			},
			status: resources.StatusChanged, message: "removed 5.02-1+b1",
		},
		{
			name: "apt absent with only config files left is stable", pkg: "ssl-cert", ensure: "absent", host: aptHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{step(t, 0, "apt/dpkg-query-config-files.stdout", "", dq("ssl-cert")...)}
			},
			status: resources.StatusStable, message: "absent",
		},
		{
			name: "apt multi-arch: the installed instance counts", pkg: "libfoo1", ensure: "2.1-1", host: aptHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{step(t, 0, "apt/dpkg-query-multiarch.stdout", "", dq("libfoo1")...)}
			},
			status: resources.StatusStable, message: "installed 2.1-1",
		},
		{
			name: "apt latest upgrades to the candidate", dup: 2, pkg: "jq", ensure: "latest", host: aptHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{
					step(t, 0, "apt/dpkg-query-jq.stdout", "", dq("jq")...),
					step(t, 0, "apt/apt-cache-policy-jq.stdout", "", pol("jq")...),
					step(t, 0, "apt/apt-get-install-jq-upgrade.stdout", "", cat(aptOpts, "--allow-downgrades", "install", "jq=1.6-2.1+deb12u3")...),
					step(t, 0, "apt/dpkg-query-jq-upgraded.stdout", "", dq("jq")...),
					// The re-check asks again; the candidate is now installed.
					resources.ReplayStep{Argv: pol("jq"), Stdout: strings.Replace(out(t, "apt/apt-cache-policy-jq.stdout"), "Installed: 1.6-2.1+deb12u1", "Installed: 1.6-2.1+deb12u3", 1)},
				}
			},
			status: resources.StatusChanged, message: "upgraded 1.6-2.1+deb12u1 to 1.6-2.1+deb12u3",
		},
		{
			name: "apt latest already the candidate is stable", pkg: "sl", ensure: "latest", host: aptHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{
					step(t, 0, "apt/dpkg-query-sl-installed.stdout", "", dq("sl")...),
					step(t, 0, "apt/apt-cache-policy-sl-installed.stdout", "", pol("sl")...),
				}
			},
			status: resources.StatusStable, message: "installed 5.02-1+b1 (latest)",
		},
		{
			name: "apt latest of an unknown package", pkg: "manifold-no-such-pkg", ensure: "latest", host: aptHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{
					step(t, 1, "", "apt/dpkg-query-unknown.stderr", dq("manifold-no-such-pkg")...),
					step(t, 0, "apt/apt-cache-policy-unknown.stdout", "", pol("manifold-no-such-pkg")...),
				}
			},
			status: resources.StatusFailed, errIs: ErrNoCandidate,
		},
		{
			name: "apt pinned version installs", dup: 1, pkg: "sl", ensure: "5.02-1+b1", host: aptHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{
					step(t, 1, "", "apt/dpkg-query-sl-absent.stderr", dq("sl")...),
					step(t, 0, "apt/apt-get-install-sl-version.stdout", "apt/apt-get-install-sl-version.stderr", cat(aptOpts, "--allow-downgrades", "install", "sl=5.02-1+b1")...),
					step(t, 0, "apt/dpkg-query-sl-installed.stdout", "", dq("sl")...),
				}
			},
			status: resources.StatusChanged, message: "installed 5.02-1+b1",
		},
		{
			name: "apt unknown version fails with apt's reason", dup: 1, pkg: "sl", ensure: "9.9-9", host: aptHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{
					step(t, 1, "", "apt/dpkg-query-sl-absent.stderr", dq("sl")...),
					step(t, 100, "apt/apt-get-install-sl-badversion.stdout", "apt/apt-get-install-sl-badversion.stderr", cat(aptOpts, "--allow-downgrades", "install", "sl=9.9-9")...),
				}
			},
			status: resources.StatusFailed, errIs: ErrCommandFailed, errText: "E: Version '9.9-9' for 'sl' was not found",
		},
		{
			name: "apt unknown package fails with apt's reason", dup: 1, pkg: "manifold-no-such-pkg", ensure: "present", host: aptHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{
					step(t, 1, "", "apt/dpkg-query-unknown.stderr", dq("manifold-no-such-pkg")...),
					step(t, 100, "apt/apt-get-install-unknown.stdout", "apt/apt-get-install-unknown.stderr", cat(aptOpts, "install", "manifold-no-such-pkg")...),
				}
			},
			status: resources.StatusFailed, errIs: ErrCommandFailed, errText: "install (provider apt): package manager command failed: apt-get -y -q -o DPkg::Lock::Timeout=300 -o DPkg::Options::=--force-confold install manifold-no-such-pkg exited 100: E: Unable to locate package manifold-no-such-pkg",
		},
		{
			name: "dnf present installs", dup: 1, pkg: "tcsh", ensure: "present", host: dnfHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{
					step(t, 1, "dnf/rpm-q-tcsh-absent.stdout", "", rpmq("tcsh")...),
					step(t, 0, "dnf/dnf-install-tcsh.stdout", "", "dnf", "-y", "install", "tcsh"),
					step(t, 0, "dnf/rpm-q-tcsh.stdout", "", rpmq("tcsh")...),
				}
			},
			status: resources.StatusChanged, message: "installed",
		},
		{
			name: "dnf absent removes", dup: 1, pkg: "tcsh", ensure: "absent", host: dnfHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{
					step(t, 0, "dnf/rpm-q-tcsh.stdout", "", rpmq("tcsh")...),
					step(t, 0, "dnf/dnf-remove-tcsh.stdout", "", "dnf", "-y", "remove", "tcsh"),
					step(t, 1, "dnf/rpm-q-tcsh-absent.stdout", "", rpmq("tcsh")...),
				}
			},
			status: resources.StatusChanged, message: "removed 6.22.03-6.el9",
		},
		{
			name: "dnf latest upgrades", dup: 2, pkg: "zsh", ensure: "latest", host: dnfHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{
					step(t, 0, "dnf/rpm-q-zsh.stdout", "", rpmq("zsh")...),
					step(t, 100, "dnf/dnf-check-update-zsh.stdout", "", "dnf", "-q", "check-update", "zsh"),
					step(t, 0, "", "", "dnf", "-y", "install", "zsh-5.8-9.el9_5"),
					step(t, 0, "dnf/rpm-q-zsh-upgraded.stdout", "", rpmq("zsh")...),
					step(t, 0, "", "", "dnf", "-q", "check-update", "zsh"),
				}
			},
			status: resources.StatusChanged, message: "upgraded 5.8-9.el9 to 5.8-9.el9_5",
		},
		{
			name: "dnf version without release matches", pkg: "zsh", ensure: "5.8", host: dnfHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{step(t, 0, "dnf/rpm-q-zsh.stdout", "", rpmq("zsh")...)}
			},
			status: resources.StatusStable, message: "installed 5.8-9.el9",
		},
		{
			name: "dnf downgrade to an older version", dup: 1, pkg: "zsh", ensure: "5.6-1.el9", host: dnfHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{
					step(t, 0, "dnf/rpm-q-zsh.stdout", "", rpmq("zsh")...),
					step(t, 0, "", "", "dnf", "-y", "downgrade", "zsh-5.6-1.el9"),
					{Argv: rpmq("zsh"), Stdout: "zsh 0 5.6 1.el9 x86_64\n"},
				}
			},
			status: resources.StatusChanged, message: "downgraded 5.8-9.el9 to 5.6-1.el9",
		},
		{
			name: "dnf newest of several installed kernels", pkg: "kernel-core", ensure: "5.14.0-503.14.1.el9_5", host: dnfHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{step(t, 0, "dnf/rpm-q-kernel.stdout", "", rpmq("kernel-core")...)}
			},
			status: resources.StatusStable, message: "installed 5.14.0-503.14.1.el9_5",
		},
		{
			name: "dnf epoch", pkg: "openssl", ensure: "1:3.0.7-27.el9", host: dnfHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{step(t, 0, "dnf/rpm-q-epoch.stdout", "", rpmq("openssl")...)}
			},
			status: resources.StatusStable, message: "installed 1:3.0.7-27.el9",
		},
		{
			name: "dnf unknown package", dup: 1, pkg: "manifold-no-such-pkg", ensure: "present", host: dnfHost,
			steps: func(t *testing.T) []resources.ReplayStep {
				return []resources.ReplayStep{
					{Argv: rpmq("manifold-no-such-pkg"), ExitCode: 1, Stdout: "package manifold-no-such-pkg is not installed\n"},
					step(t, 1, "", "dnf/dnf-install-unknown.stderr", "dnf", "-y", "install", "manifold-no-such-pkg"),
				}
			},
			status: resources.StatusFailed, errIs: ErrCommandFailed, errText: "Error: Unable to find a match: manifold-no-such-pkg",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			steps := tt.steps(t)
			steps = append(slices.Clone(steps[:tt.dup]), steps...)
			runner := tt.host(steps...)
			res := newPackage(t, tt.pkg, tt.ensure, "")
			o := resources.Execute(context.Background(), res, &resources.Env{Runner: runner})
			if o.Status != tt.status {
				t.Fatalf("status %s, want %s: %s (%v)", o.Status, tt.status, o.Message, o.Err)
			}
			if tt.message != "" && o.Message != tt.message {
				t.Errorf("message %q, want %q", o.Message, tt.message)
			}
			if tt.errIs != nil && !errors.Is(o.Err, tt.errIs) {
				t.Errorf("err %v, want %v", o.Err, tt.errIs)
			}
			if tt.errText != "" && !strings.Contains(o.Err.Error(), tt.errText) {
				t.Errorf("err %q, want it to contain %q", o.Err, tt.errText)
			}
			if err := runner.Verify(); err != nil {
				t.Error(err)
			}
			for _, c := range runner.Calls() {
				mutating := c.Argv[0] == "apt-get"
				if mutating && !slices.Contains(c.Env, "DEBIAN_FRONTEND=noninteractive") {
					t.Errorf("%v ran without DEBIAN_FRONTEND=noninteractive: %v", c.Argv, c.Env)
				}
			}
		})
	}
}

// TestPackageNoopNeverMutates: in noop only queries run (any install or
// remove would be an unexpected command for the replay).
func TestPackageNoopNeverMutates(t *testing.T) {
	t.Parallel()
	for _, ensure := range []string{"present", "latest", "5.02-1+b1"} {
		runner := aptHost(
			step(t, 1, "", "apt/dpkg-query-sl-absent.stderr", dq("sl")...),
			step(t, 0, "apt/apt-cache-policy-sl-absent.stdout", "", pol("sl")...),
		)
		o := resources.Execute(context.Background(), newPackage(t, "sl", ensure, ""), &resources.Env{Runner: runner, Noop: true})
		if o.Status != resources.StatusChanged || !o.Noop || !strings.HasPrefix(o.Message, "would install") {
			t.Fatalf("ensure %s: %+v", ensure, o)
		}
		for _, c := range runner.Calls() {
			if c.Argv[0] == "apt-get" {
				t.Fatalf("ensure %s: noop ran %v", ensure, c.Argv)
			}
		}
	}
}

func TestPackageValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, ensure, provider string
		errIs                  error
	}{
		{name: "nginx"},
		{name: "libstdc++6", ensure: "12.2.0-14"},
		{name: "python3.11", ensure: "1:3.11.2-6~deb12u1"},
		{name: strings.Repeat("a", MaxName)},
		{name: strings.Repeat("a", MaxName+1), errIs: ErrInvalidName},
		{name: "nginx; rm -rf /", errIs: ErrInvalidName},
		{name: "$(reboot)", errIs: ErrInvalidName},
		{name: "a|b", errIs: ErrInvalidName},
		{name: "`id`", errIs: ErrInvalidName},
		{name: "-oDebug::pkgProblemResolver=1", errIs: ErrInvalidName},
		{name: "two words", errIs: ErrInvalidName},
		{name: "", errIs: ErrInvalidName},
		{name: "sl", ensure: "1.0;reboot", errIs: ErrInvalidVersion},
		{name: "sl", ensure: "--force", errIs: ErrInvalidVersion},
		{name: "sl", ensure: strings.Repeat("1", MaxName+1), errIs: ErrInvalidVersion},
		{name: "sl", provider: "apt"},
		{name: "sl", provider: "dnf"},
		{name: "sl", provider: "yum", errIs: resources.ErrUnknownProvider},
	}
	for _, tt := range tests {
		r, err := New(resources.Spec{Type: Type, Name: tt.name, Ensure: tt.ensure, Provider: tt.provider})
		if err != nil {
			t.Fatal(err)
		}
		err = r.Validate()
		if tt.errIs == nil && err != nil {
			t.Errorf("%q %q: %v", tt.name, tt.ensure, err)
		}
		if tt.errIs != nil && !errors.Is(err, tt.errIs) {
			t.Errorf("%q %q: err %v, want %v", tt.name, tt.ensure, err, tt.errIs)
		}
	}
	if _, err := New(resources.Spec{Type: Type, Name: "sl", Properties: map[string]any{"version": "1"}}); err == nil || !strings.Contains(err.Error(), `unknown property "version"`) {
		t.Fatalf("unknown property: %v", err)
	}
}

func TestPackageProviderSelection(t *testing.T) {
	t.Parallel()
	both := resources.NewReplayRunner(step(t, 0, "dnf/rpm-q-zsh.stdout", "", rpmq("zsh")...))
	both.SetPrograms("apt-get", "apt-cache", "dpkg-query", "dnf", "rpm")
	// Both manageable, equal priority without facts: apt wins by name...
	_, name, err := Providers.Select(context.Background(), &resources.Env{Runner: both}, "")
	if err != nil || name != "apt" {
		t.Fatalf("no facts: %q, %v", name, err)
	}
	// ...and the platform family fact tips it to dnf.
	facts := map[string]any{"host": map[string]any{"info": map[string]any{"platformFamily": "rhel"}}}
	_, name, err = Providers.Select(context.Background(), &resources.Env{Runner: both, Facts: facts}, "")
	if err != nil || name != "dnf" {
		t.Fatalf("rhel facts: %q, %v", name, err)
	}
	// provider: dnf forces it on a host where apt would win.
	o := resources.Execute(context.Background(), newPackage(t, "zsh", "present", "dnf"), &resources.Env{Runner: both})
	if o.Status != resources.StatusStable {
		t.Fatalf("forced dnf: %+v", o)
	}
	// Forcing a provider the host lacks fails clearly.
	o = resources.Execute(context.Background(), newPackage(t, "zsh", "present", "dnf"), &resources.Env{Runner: aptHost()})
	if !errors.Is(o.Err, resources.ErrProviderNotManageable) || !strings.Contains(o.Err.Error(), "dnf not found in PATH") {
		t.Fatalf("forced dnf on apt host: %v", o.Err)
	}
	// A host with neither.
	o = resources.Execute(context.Background(), newPackage(t, "zsh", "present", ""), &resources.Env{Runner: resources.NewReplayRunner()})
	if !errors.Is(o.Err, resources.ErrNoSuitableProvider) {
		t.Fatalf("no provider: %v", o.Err)
	}
}

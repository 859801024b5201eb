package pkg

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/manifold-run/manifold/resources"
)

// aptLockTimeout is how long apt-get waits for dpkg's lock held by another
// process (an administrator's apt-get, unattended-upgrades), in seconds.
const aptLockTimeout = "300"

// aptEnv keeps apt-get and dpkg from asking questions.
var aptEnv = []string{
	"DEBIAN_FRONTEND=noninteractive",
	"APT_LISTBUGS_FRONTEND=none",
	"APT_LISTCHANGES_FRONTEND=none",
}

// dpkgQueryFormat prints one line per package instance (one per
// architecture for multi-arch packages).
const dpkgQueryFormat = "-f=${Package} ${Version} ${Architecture} ${db:Status-Status}\n"

// aptProvider manages packages with apt on Debian and its derivatives. It
// can manage a host with apt-get, apt-cache and dpkg-query in PATH, with
// priority 2 on hosts whose platformFamily fact is debian and 1 otherwise.
var aptProvider = resources.Provider[Manager]{
	Name: "apt",
	Manageable: func(_ context.Context, env *resources.Env) (int, error) {
		if err := resources.RequirePrograms(env, "apt-get", "apt-cache", "dpkg-query"); err != nil {
			return 0, err
		}
		if resources.FactString(env.Facts, "host.info.platformFamily") == "debian" {
			return 2, nil
		}
		return 1, nil
	},
	New: func(env *resources.Env) Manager { return &apt{run: runner(env)} },
}

// apt is the apt provider for one execution.
type apt struct {
	run resources.CommandRunner
}

// Installed asks dpkg-query; a package known to dpkg but not installed
// (removed with its configuration files kept, half-installed) counts as
// not installed.
func (a *apt) Installed(ctx context.Context, name string) (string, error) {
	res, err := run(ctx, a.run, nil, "dpkg-query", "-W", dpkgQueryFormat, name)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		// Exit 1 with "no packages found matching" is the unknown package.
		if strings.Contains(string(res.Stderr), "no packages found") {
			return "", nil
		}
		return "", fmt.Errorf("%w: dpkg-query -W %s exited %d: %s", ErrCommandFailed, name, res.ExitCode, reason(res))
	}
	sc := bufio.NewScanner(strings.NewReader(string(res.Stdout)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			if len(f) == 0 {
				continue
			}
			return "", fmt.Errorf("dpkg-query -W %s: cannot parse %q", name, sc.Text())
		}
		if f[len(f)-1] == "installed" {
			return f[1], nil
		}
	}
	return "", nil
}

// Newer reads the Candidate of apt-cache policy (from the current package
// lists) and returns it when it is newer than installed.
func (a *apt) Newer(ctx context.Context, name, installed string) (string, error) {
	res, err := run(ctx, a.run, nil, "apt-cache", "policy", name)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("%w: apt-cache policy %s exited %d: %s", ErrCommandFailed, name, res.ExitCode, reason(res))
	}
	candidate := ""
	sc := bufio.NewScanner(strings.NewReader(string(res.Stdout)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Candidate:"); ok {
			candidate = strings.TrimSpace(v)
			break
		}
	}
	if candidate == "" || candidate == "(none)" {
		return "", fmt.Errorf("%w for %s in the apt lists (apt-cache policy)", ErrNoCandidate, name)
	}
	if installed != "" && CompareDebian(candidate, installed) <= 0 {
		return "", nil
	}
	return candidate, nil
}

// Install runs one apt-get install for pkgs, pinning those with a version
// (name=version, and --allow-downgrades when any is pinned).
func (a *apt) Install(ctx context.Context, pkgs []Change) error {
	argv := []string{"apt-get", "-y", "-q", "-o", "DPkg::Lock::Timeout=" + aptLockTimeout, "-o", "DPkg::Options::=--force-confold"}
	if slices.ContainsFunc(pkgs, func(c Change) bool { return c.Version != "" }) {
		argv = append(argv, "--allow-downgrades")
	}
	argv = append(argv, "install")
	for _, c := range pkgs {
		if c.Version == "" {
			argv = append(argv, c.Name)
		} else {
			argv = append(argv, c.Name+"="+c.Version)
		}
	}
	return mustSucceed(ctx, a.run, aptEnv, argv...)
}

// Remove runs one apt-get remove for names (configuration files stay).
func (a *apt) Remove(ctx context.Context, names []string) error {
	argv := []string{"apt-get", "-y", "-q", "-o", "DPkg::Lock::Timeout=" + aptLockTimeout, "remove"}
	return mustSucceed(ctx, a.run, aptEnv, append(argv, names...)...)
}

// Compare orders Debian versions as dpkg does.
func (a *apt) Compare(installed, want string) int { return CompareDebian(installed, want) }

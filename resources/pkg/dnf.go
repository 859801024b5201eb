package pkg

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/manifold-run/manifold/resources"
)

// rpmQueryFormat prints name, epoch (0 when none), version, release and
// architecture, one line per installed instance.
const rpmQueryFormat = "%{NAME} %|EPOCH?{%{EPOCH}}:{0}| %{VERSION} %{RELEASE} %{ARCH}\n"

// dnfProvider manages packages with dnf on Fedora and Enterprise Linux. It
// can manage a host with dnf and rpm in PATH, with priority 2 on hosts
// whose platformFamily fact is rhel or fedora and 1 otherwise.
var dnfProvider = resources.Provider[Manager]{
	Name: "dnf",
	Manageable: func(_ context.Context, env *resources.Env) (int, error) {
		if err := resources.RequirePrograms(env, "dnf", "rpm"); err != nil {
			return 0, err
		}
		switch resources.FactString(env.Facts, "host.info.platformFamily") {
		case "rhel", "fedora":
			return 2, nil
		}
		return 1, nil
	},
	New: func(env *resources.Env) Manager { return &dnf{run: runner(env)} },
}

// dnf is the dnf provider for one execution. Versions are
// "[epoch:]version-release", the epoch shown only when not 0, as dnf
// prints them.
type dnf struct {
	run resources.CommandRunner
}

// Installed asks rpm -q. Exit 1 ("package x is not installed") means not
// installed.
func (d *dnf) Installed(ctx context.Context, name string) (string, error) {
	res, err := run(ctx, d.run, nil, "rpm", "-q", "--queryformat", rpmQueryFormat, name)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		if strings.Contains(string(res.Stdout)+string(res.Stderr), "is not installed") {
			return "", nil
		}
		return "", fmt.Errorf("%w: rpm -q %s exited %d: %s", ErrCommandFailed, name, res.ExitCode, reason(res))
	}
	// Several instances (multilib, installonly kernels): the newest counts.
	best := ""
	sc := bufio.NewScanner(strings.NewReader(string(res.Stdout)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 5 {
			return "", fmt.Errorf("rpm -q %s: cannot parse %q", name, sc.Text())
		}
		v := f[2] + "-" + f[3]
		if f[1] != "0" {
			v = f[1] + ":" + v
		}
		if best == "" || CompareRPM(v, best) > 0 {
			best = v
		}
	}
	if best == "" {
		return "", fmt.Errorf("rpm -q %s: no output", name)
	}
	return best, nil
}

// Newer asks dnf check-update (exit 100 and a line "name.arch version repo"
// when an update is available, 0 when none). For a package not installed it
// returns "": dnf install then picks the newest.
func (d *dnf) Newer(ctx context.Context, name, installed string) (string, error) {
	if installed == "" {
		return "", nil
	}
	res, err := run(ctx, d.run, nil, "dnf", "-q", "check-update", name)
	if err != nil {
		return "", err
	}
	switch res.ExitCode {
	case 0:
		return "", nil
	case 100:
	default:
		return "", fmt.Errorf("%w: dnf check-update %s exited %d: %s", ErrCommandFailed, name, res.ExitCode, reason(res))
	}
	sc := bufio.NewScanner(strings.NewReader(string(res.Stdout)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && strings.HasPrefix(f[0], name+".") {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("dnf check-update %s: exit 100 but no update line for it", name)
}

// Install runs one dnf install for pkgs (name-version for those with a
// version), and one dnf downgrade for those whose version is older than
// the installed one: dnf install refuses a downgrade.
func (d *dnf) Install(ctx context.Context, pkgs []Change) error {
	var install, downgrade []string
	for _, c := range pkgs {
		switch {
		case c.Version == "":
			install = append(install, c.Name)
		case c.Installed != "" && d.Compare(c.Installed, c.Version) > 0:
			downgrade = append(downgrade, c.Name+"-"+c.Version)
		default:
			install = append(install, c.Name+"-"+c.Version)
		}
	}
	if len(install) > 0 {
		if err := mustSucceed(ctx, d.run, nil, append([]string{"dnf", "-y", "install"}, install...)...); err != nil {
			return err
		}
	}
	if len(downgrade) > 0 {
		return mustSucceed(ctx, d.run, nil, append([]string{"dnf", "-y", "downgrade"}, downgrade...)...)
	}
	return nil
}

// Remove runs one dnf remove for names.
func (d *dnf) Remove(ctx context.Context, names []string) error {
	return mustSucceed(ctx, d.run, nil, append([]string{"dnf", "-y", "remove"}, names...)...)
}

// Compare orders an installed "[epoch:]version-release" against a wanted
// version; a wanted version without a release compares versions only, so
// "5.8" matches "5.8-9.el9".
func (d *dnf) Compare(installed, want string) int {
	if !strings.Contains(want, "-") {
		e, v, _ := splitEVR(installed)
		we, wv, _ := splitEVR(want)
		if c := CompareRPM(e, we); c != 0 {
			return c
		}
		return CompareRPM(v, wv)
	}
	return CompareEVR(installed, want)
}

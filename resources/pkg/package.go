package pkg

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/manifold-run/manifold/resources"
)

// Type is the resource type name, as written in manifests.
const Type = "package"

// MaxName is the longest package name or version accepted, in bytes.
const MaxName = 255

// Ensure is the desired state of a package: one of the constants below or
// an exact version ("1.6-2.1+deb12u3").
type Ensure string

const (
	// EnsurePresent wants the package installed, any version (the default).
	EnsurePresent Ensure = "present"
	// EnsureAbsent wants the package removed (apt-get remove: configuration
	// files stay, as with CCM).
	EnsureAbsent Ensure = "absent"
	// EnsureLatest wants the newest version the package manager knows of
	// (its current lists: no apt-get update is run). Unlike CCM, which
	// reports a change on every run, an installed package already at that
	// version is stable.
	EnsureLatest Ensure = "latest"
)

// namePattern is what a package name or version may hold: no shell
// metacharacters, no spaces, and no leading '-' (it would read as an
// option).
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+:~^-]*$`)

// Properties are the package type's own properties: none beyond the common
// ones (name, ensure, provider), as in CCM.
type Properties struct{}

// Manager is what a provider does for the package type. Versions are in
// the manager's own syntax (dpkg's "epoch:upstream-revision", rpm's
// "epoch:version-release").
type Manager interface {
	// Installed returns the installed version of name, or "" when it is
	// not installed.
	Installed(ctx context.Context, name string) (string, error)
	// Newer returns the version an upgrade of installed name would bring,
	// or "" when installed is the newest known. With installed "" it
	// returns the version an install would bring, or "" when unknown.
	Newer(ctx context.Context, name, installed string) (string, error)
	// Install installs, upgrades or downgrades pkgs, in one transaction
	// when the manager can.
	Install(ctx context.Context, pkgs []Change) error
	// Remove removes names in one transaction.
	Remove(ctx context.Context, names []string) error
	// Compare orders installed against a wanted version: <0 older, 0 the
	// same, >0 newer.
	Compare(installed, want string) int
}

// Change is one package Manager.Install brings to a version.
type Change struct {
	// Name is the package.
	Name string
	// Version is the version to install; "" means the newest.
	Version string
	// Installed is the installed version; "" means not installed.
	Installed string
}

// Providers are the package providers: apt and dnf.
var Providers = resources.NewProviders(Type, aptProvider, dnfProvider)

// Package is one package resource. Build it with New.
type Package struct {
	name     string
	ensure   Ensure
	provider string
}

var (
	_ resources.Resource = (*Package)(nil)
	_ resources.Batcher  = (*Package)(nil)
	_ resources.Factory  = New
)

// New is the package type's resources.Factory. An empty ensure means
// present.
func New(spec resources.Spec) (resources.Resource, error) {
	var props Properties
	if err := resources.DecodeProperties(spec.Properties, &props); err != nil {
		return nil, err
	}
	p := &Package{name: spec.Name, ensure: Ensure(spec.Ensure), provider: spec.Provider}
	if p.ensure == "" {
		p.ensure = EnsurePresent
	}
	return p, nil
}

// Validate checks the name, the ensure value and the provider without
// touching the system.
func (p *Package) Validate() error {
	if err := checkToken(p.name); err != nil {
		return fmt.Errorf("name %q: %w: %w", p.name, ErrInvalidName, err)
	}
	switch p.ensure {
	case EnsurePresent, EnsureAbsent, EnsureLatest:
	default:
		if err := checkToken(string(p.ensure)); err != nil {
			return fmt.Errorf("ensure %q: %w: want present, absent, latest or a version: %w", p.ensure, ErrInvalidVersion, err)
		}
	}
	return Providers.Check(p.provider)
}

func checkToken(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty")
	case len(s) > MaxName:
		return fmt.Errorf("%d bytes, limit %d", len(s), MaxName)
	case !namePattern.MatchString(s):
		return fmt.Errorf("only letters, digits and . _ + : ~ ^ - are allowed, not first -")
	}
	return nil
}

// CheckApply compares the installed version with ensure and, with apply,
// installs, upgrades, downgrades or removes the package. The provider is
// chosen for the host (or forced by the provider property) and its lock is
// held for the whole call.
func (p *Package) CheckApply(ctx context.Context, env *resources.Env, apply bool) (resources.Result, error) {
	if env == nil {
		env = &resources.Env{}
	}
	mgr, provider, err := Providers.Select(ctx, env, p.provider)
	if err != nil {
		return resources.Result{}, err
	}
	unlock, err := resources.LockPackageManager(ctx, provider)
	if err != nil {
		return resources.Result{}, err
	}
	defer unlock()

	pl, err := p.assess(ctx, mgr)
	if err != nil || !pl.res.Changed || !apply {
		return pl.res, err
	}
	if pl.remove {
		err = mgr.Remove(ctx, []string{p.name})
	} else {
		err = mgr.Install(ctx, []Change{pl.change})
	}
	if err != nil {
		return resources.Result{}, fmt.Errorf("%s (provider %s): %w", pl.res.Message, provider, err)
	}
	pl.res.Message = pastTense(pl.res.Message)
	return pl.res, nil
}

// BatchKey makes consecutive packages of one provider (chosen as
// CheckApply chooses it) and one operation a batch: "<provider> install"
// for present, latest and versions, "<provider> remove" for absent.
func (p *Package) BatchKey(ctx context.Context, env *resources.Env) (string, error) {
	if env == nil {
		env = &resources.Env{}
	}
	_, provider, err := Providers.Select(ctx, env, p.provider)
	if err != nil {
		return "", err
	}
	if p.ensure == EnsureAbsent {
		return provider + " remove", nil
	}
	return provider + " install", nil
}

// ApplyBatch installs members (or, for absent, removes them) with one
// package-manager command: apt-get install a b=1.2 c, dnf install a b-1.2
// c (dnf runs downgrades as a second command, dnf downgrade). It holds the
// provider's lock once for the whole batch, and reads each member's state
// again under it, as CheckApply does before it changes anything: a member
// found converged by then is left out and reported unchanged.
func (p *Package) ApplyBatch(ctx context.Context, env *resources.Env, members []resources.Batcher) ([]resources.Result, error) {
	if env == nil {
		env = &resources.Env{}
	}
	mgr, provider, err := Providers.Select(ctx, env, p.provider)
	if err != nil {
		return nil, err
	}
	unlock, err := resources.LockPackageManager(ctx, provider)
	if err != nil {
		return nil, err
	}
	defer unlock()

	results := make([]resources.Result, len(members))
	var (
		installs []Change
		removes  []string
		changes  []string // the members' messages, for the error
	)
	for i, m := range members {
		q, ok := m.(*Package)
		if !ok {
			return nil, fmt.Errorf("a batch of packages holds a %T", m)
		}
		pl, err := q.assess(ctx, mgr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q.name, err)
		}
		results[i] = pl.res
		switch {
		case !pl.res.Changed:
			continue
		case pl.remove != (p.ensure == EnsureAbsent):
			return nil, fmt.Errorf("package %s (ensure %s) cannot join a batch led by %s (ensure %s)", q.name, q.ensure, p.name, p.ensure)
		case pl.remove:
			removes = append(removes, q.name)
		default:
			installs = append(installs, pl.change)
		}
		changes = append(changes, q.name+": "+pl.res.Message)
		results[i].Message = pastTense(pl.res.Message)
	}
	switch {
	case len(removes) > 0:
		err = mgr.Remove(ctx, removes)
	case len(installs) > 0:
		err = mgr.Install(ctx, installs)
	}
	if err != nil {
		return nil, fmt.Errorf("%s (provider %s): %w", strings.Join(changes, ", "), provider, err)
	}
	return results, nil
}

// plan is what a package needs, as read from the host.
type plan struct {
	// res is the check's result: Changed when something must be done.
	res    resources.Result
	change Change // what to install, unless remove
	remove bool
}

// assess compares the installed version with ensure.
func (p *Package) assess(ctx context.Context, mgr Manager) (plan, error) {
	installed, err := mgr.Installed(ctx, p.name)
	if err != nil {
		return plan{}, err
	}
	pl := plan{change: Change{Name: p.name, Installed: installed}}
	switch p.ensure {
	case EnsureAbsent:
		if installed == "" {
			return plan{res: resources.Result{Message: "absent"}}, nil
		}
		pl.remove = true
		pl.res = resources.Result{Changed: true, Message: "remove " + installed}
	case EnsurePresent:
		if installed != "" {
			return plan{res: resources.Result{Message: "installed " + installed}}, nil
		}
		pl.res = resources.Result{Changed: true, Message: "install"}
	case EnsureLatest:
		newer, err := mgr.Newer(ctx, p.name, installed)
		if err != nil {
			return plan{}, err
		}
		if installed != "" && newer == "" {
			return plan{res: resources.Result{Message: "installed " + installed + " (latest)"}}, nil
		}
		if installed == "" && newer == "" {
			// Ask the manager to install whatever it has; it fails clearly
			// if it has nothing.
			pl.res = resources.Result{Changed: true, Message: "install"}
			break
		}
		pl.change.Version = newer
		pl.res = changeResult(installed, newer, 1)
	default:
		want := string(p.ensure)
		pl.change.Version = want
		if installed != "" {
			c := mgr.Compare(installed, want)
			if c == 0 {
				return plan{res: resources.Result{Message: "installed " + installed}}, nil
			}
			pl.res = changeResult(installed, want, -c)
		} else {
			pl.res = changeResult("", want, 1)
		}
	}
	return pl, nil
}

// changeResult words moving from installed to want: direction >0 is an
// upgrade, <0 a downgrade.
func changeResult(installed, want string, direction int) resources.Result {
	r := resources.Result{Changed: true, Diff: fmt.Sprintf("version: %s → %s\n", orAbsent(installed), orAbsent(want))}
	switch {
	case installed == "":
		r.Message = "install " + want
	case direction > 0:
		r.Message = "upgrade " + installed + " to " + want
	default:
		r.Message = "downgrade " + installed + " to " + want
	}
	return r
}

func orAbsent(v string) string {
	if v == "" {
		return "absent"
	}
	return v
}

// pastTense turns a check message ("install 1.2") into an apply message
// ("installed 1.2").
func pastTense(msg string) string {
	for _, v := range []struct{ verb, past string }{
		{"install", "installed"}, {"upgrade", "upgraded"}, {"downgrade", "downgraded"}, {"remove", "removed"},
	} {
		if rest, ok := cutWord(msg, v.verb); ok {
			return v.past + rest
		}
	}
	return msg
}

func cutWord(s, word string) (string, bool) {
	if s == word {
		return "", true
	}
	if len(s) > len(word) && s[:len(word)] == word && s[len(word)] == ' ' {
		return s[len(word):], true
	}
	return "", false
}

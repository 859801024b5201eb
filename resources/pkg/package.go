package pkg

import (
	"context"
	"fmt"
	"regexp"

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
	// Install installs version of name ("" means the newest), upgrading
	// or downgrading from installed ("" when absent).
	Install(ctx context.Context, name, version, installed string) error
	// Remove removes name.
	Remove(ctx context.Context, name string) error
	// Compare orders installed against a wanted version: <0 older, 0 the
	// same, >0 newer.
	Compare(installed, want string) int
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

	installed, err := mgr.Installed(ctx, p.name)
	if err != nil {
		return resources.Result{}, err
	}
	var (
		want   string // the version to install; "" means the newest
		remove bool
		res    resources.Result
	)
	switch p.ensure {
	case EnsureAbsent:
		if installed == "" {
			return resources.Result{Message: "absent"}, nil
		}
		remove = true
		res = resources.Result{Changed: true, Message: "remove " + installed}
	case EnsurePresent:
		if installed != "" {
			return resources.Result{Message: "installed " + installed}, nil
		}
		res = resources.Result{Changed: true, Message: "install"}
	case EnsureLatest:
		newer, err := mgr.Newer(ctx, p.name, installed)
		if err != nil {
			return resources.Result{}, err
		}
		if installed != "" && newer == "" {
			return resources.Result{Message: "installed " + installed + " (latest)"}, nil
		}
		if installed == "" && newer == "" {
			// Ask the manager to install whatever it has; it fails clearly
			// if it has nothing.
			res = resources.Result{Changed: true, Message: "install"}
			break
		}
		want = newer
		res = changeResult(installed, newer, 1)
	default:
		want = string(p.ensure)
		if installed != "" {
			c := mgr.Compare(installed, want)
			if c == 0 {
				return resources.Result{Message: "installed " + installed}, nil
			}
			res = changeResult(installed, want, -c)
		} else {
			res = changeResult("", want, 1)
		}
	}
	if !apply {
		return res, nil
	}
	if remove {
		err = mgr.Remove(ctx, p.name)
	} else {
		err = mgr.Install(ctx, p.name, want, installed)
	}
	if err != nil {
		return resources.Result{}, fmt.Errorf("%s (provider %s): %w", res.Message, provider, err)
	}
	res.Message = pastTense(res.Message)
	return res, nil
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

package resources

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// Provider is one implementation of a resource type: apt and dnf for
// package, systemd for service. P is the interface the type drives (what
// "install" or "start" means for this implementation).
//
// Selection follows CCM's provider model: each provider is asked whether it
// can manage this host (Manageable); of those that can, the highest priority
// wins and equal priorities are broken by name, so the choice never depends
// on registration or map order. A `provider:` property forces one.
type Provider[P any] struct {
	// Name is what a manifest's provider property names ("apt").
	Name string
	// Manageable reports whether the provider can manage this host and with
	// what priority (higher wins). It returns an error saying why not when
	// it cannot ("apt-get not found in PATH"); that reason is shown when no
	// provider is suitable. It may read env.Facts and look programs up with
	// LookPath, and must not change the system.
	Manageable func(ctx context.Context, env *Env) (priority int, err error)
	// New builds the implementation for one execution.
	New func(env *Env) P
}

// Providers is the provider set of one resource type. Build it once with
// NewProviders; it is read-only afterwards and safe for concurrent use.
type Providers[P any] struct {
	typ  string
	list []Provider[P] // sorted by name
}

// NewProviders returns the provider set of type typ. It panics when a
// provider has an empty name, a nil function, or a name used twice: all are
// programming errors.
func NewProviders[P any](typ string, providers ...Provider[P]) *Providers[P] {
	list := slices.Clone(providers)
	for _, p := range list {
		if p.Name == "" || p.Manageable == nil || p.New == nil {
			panic(fmt.Sprintf("resources: provider of %s with an empty name or nil function", typ))
		}
	}
	slices.SortFunc(list, func(a, b Provider[P]) int { return cmp.Compare(a.Name, b.Name) })
	for i := 1; i < len(list); i++ {
		if list[i].Name == list[i-1].Name {
			panic(fmt.Sprintf("resources: provider %q of %s registered twice", list[i].Name, typ))
		}
	}
	return &Providers[P]{typ: typ, list: list}
}

// Names returns the providers' names, sorted.
func (ps *Providers[P]) Names() []string {
	names := make([]string, len(ps.list))
	for i, p := range ps.list {
		names[i] = p.Name
	}
	return names
}

// Check validates a provider property without touching the system: empty
// (the type picks) or the name of a provider of this type. The error wraps
// ErrUnknownProvider and lists the known ones:
// `provider "apx": unknown provider of package (known: apt, dnf)`.
func (ps *Providers[P]) Check(name string) error {
	if name == "" {
		return nil
	}
	if _, ok := ps.find(name); ok {
		return nil
	}
	return fmt.Errorf("provider %q: %w of %s (known: %s)", name, ErrUnknownProvider, ps.typ, strings.Join(ps.Names(), ", "))
}

func (ps *Providers[P]) find(name string) (Provider[P], bool) {
	i, ok := slices.BinarySearchFunc(ps.list, name, func(p Provider[P], n string) int { return cmp.Compare(p.Name, n) })
	if !ok {
		return Provider[P]{}, false
	}
	return ps.list[i], true
}

// Select picks the provider for this host and builds it. With forced set it
// is that provider, provided it can manage the host (an error wrapping
// ErrProviderNotManageable otherwise, or ErrUnknownProvider). Without, every
// provider is asked, the highest priority of those that can manage the host
// wins, ties going to the name that sorts first; none able gives an error
// wrapping ErrNoSuitableProvider with each provider's reason. It returns the
// chosen provider's name too.
func (ps *Providers[P]) Select(ctx context.Context, env *Env, forced string) (P, string, error) {
	var zero P
	if env == nil {
		env = &Env{}
	}
	if forced != "" {
		p, ok := ps.find(forced)
		if !ok {
			return zero, "", ps.Check(forced)
		}
		if _, err := p.Manageable(ctx, env); err != nil {
			return zero, "", fmt.Errorf("provider %q: %w: %w", forced, ErrProviderNotManageable, err)
		}
		return p.New(env), p.Name, nil
	}
	best, bestPrio := -1, 0
	var reasons []error
	for i, p := range ps.list {
		prio, err := p.Manageable(ctx, env)
		if err != nil {
			reasons = append(reasons, fmt.Errorf("%s: %w", p.Name, err))
			continue
		}
		// Strictly greater: on a tie the earlier (smaller) name stays.
		if best < 0 || prio > bestPrio {
			best, bestPrio = i, prio
		}
	}
	if best < 0 {
		return zero, "", fmt.Errorf("%w of %s can manage this host: %w", ErrNoSuitableProvider, ps.typ, errors.Join(reasons...))
	}
	p := ps.list[best]
	return p.New(env), p.Name, nil
}

// ProgramFinder is implemented by command runners that decide where a
// program is found; ReplayRunner implements it so providers' Manageable can
// be tested on hosts without the tools.
type ProgramFinder interface {
	// LookPath returns the path of program name, or an error.
	LookPath(name string) (string, error)
}

// LookPath finds program name the way env's runner would: through the
// runner when it is a ProgramFinder, else in this process's PATH.
func LookPath(env *Env, name string) (string, error) {
	if env != nil {
		if f, ok := env.Runner.(ProgramFinder); ok {
			return f.LookPath(name)
		}
	}
	return exec.LookPath(name)
}

// RequirePrograms returns nil when every program is found with LookPath,
// else an error naming the first missing one: a ready-made body for
// Provider.Manageable.
func RequirePrograms(env *Env, names ...string) error {
	for _, n := range names {
		if _, err := LookPath(env, n); err != nil {
			return fmt.Errorf("%s not found in PATH", n)
		}
	}
	return nil
}

// FactString returns the string at a dotted path of facts
// ("host.info.platformFamily"), or "" when any step is missing or not a
// string.
func FactString(facts map[string]any, path string) string {
	var cur any = facts
	for part := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[part]
	}
	s, _ := cur.(string)
	return s
}

package resources

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

type fakeProvider struct{ name string }

func fixed(prio int, err error) func(context.Context, *Env) (int, error) {
	return func(context.Context, *Env) (int, error) { return prio, err }
}

func prov(name string, prio int, err error) Provider[fakeProvider] {
	return Provider[fakeProvider]{
		Name:       name,
		Manageable: fixed(prio, err),
		New:        func(*Env) fakeProvider { return fakeProvider{name: name} },
	}
}

func TestProvidersSelect(t *testing.T) {
	t.Parallel()
	no := errors.New("tool not found in PATH")
	tests := []struct {
		name    string
		ps      []Provider[fakeProvider]
		forced  string
		want    string
		errIs   error
		errText string
	}{
		{name: "highest priority wins", ps: []Provider[fakeProvider]{prov("a", 1, nil), prov("b", 5, nil), prov("c", 2, nil)}, want: "b"},
		{name: "tie broken by name whatever the order", ps: []Provider[fakeProvider]{prov("zed", 3, nil), prov("mid", 3, nil), prov("low", 1, nil)}, want: "mid"},
		{name: "unmanageable skipped", ps: []Provider[fakeProvider]{prov("apt", 9, no), prov("dnf", 1, nil)}, want: "dnf"},
		{name: "forced beats priority", ps: []Provider[fakeProvider]{prov("apt", 9, nil), prov("dnf", 1, nil)}, forced: "dnf", want: "dnf"},
		{name: "forced but unmanageable", ps: []Provider[fakeProvider]{prov("apt", 9, nil), prov("dnf", 1, no)}, forced: "dnf",
			errIs: ErrProviderNotManageable, errText: `provider "dnf": provider cannot manage this host: tool not found in PATH`},
		{name: "forced unknown", ps: []Provider[fakeProvider]{prov("apt", 1, nil), prov("dnf", 1, nil)}, forced: "yum",
			errIs: ErrUnknownProvider, errText: `provider "yum": unknown provider of package (known: apt, dnf)`},
		{name: "none suitable lists reasons", ps: []Provider[fakeProvider]{prov("dnf", 1, no), prov("apt", 1, errors.New("apt-get not found in PATH"))},
			errIs: ErrNoSuitableProvider, errText: "no suitable provider of package can manage this host: apt: apt-get not found in PATH\ndnf: tool not found in PATH"},
		{name: "negative priority still manageable", ps: []Provider[fakeProvider]{prov("only", -3, nil)}, want: "only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ps := NewProviders("package", tt.ps...)
			got, name, err := ps.Select(context.Background(), nil, tt.forced)
			if tt.errIs != nil {
				if !errors.Is(err, tt.errIs) || err.Error() != tt.errText {
					t.Fatalf("err = %v, want %q wrapping %v", err, tt.errText, tt.errIs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.name != tt.want || name != tt.want {
				t.Fatalf("selected %q (%q), want %q", got.name, name, tt.want)
			}
		})
	}
}

func TestProvidersCheckAndNames(t *testing.T) {
	t.Parallel()
	ps := NewProviders("package", prov("dnf", 1, nil), prov("apt", 1, nil))
	if got := ps.Names(); !slices.Equal(got, []string{"apt", "dnf"}) {
		t.Fatalf("Names = %v", got)
	}
	for _, ok := range []string{"", "apt", "dnf"} {
		if err := ps.Check(ok); err != nil {
			t.Errorf("Check(%q) = %v", ok, err)
		}
	}
	err := ps.Check("Apt")
	if !errors.Is(err, ErrUnknownProvider) || !strings.Contains(err.Error(), "known: apt, dnf") {
		t.Fatalf("Check(Apt) = %v", err)
	}
}

func TestNewProvidersPanicsOnDuplicate(t *testing.T) {
	t.Parallel()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"apt" of package registered twice`) {
			t.Fatalf("recover() = %v", r)
		}
	}()
	NewProviders("package", prov("apt", 1, nil), prov("apt", 2, nil))
}

func TestLookPathThroughReplayRunner(t *testing.T) {
	t.Parallel()
	r := NewReplayRunner(ReplayStep{Argv: []string{"dpkg-query", "-W"}})
	r.SetPrograms("apt-get")
	env := &Env{Runner: r}
	if err := RequirePrograms(env, "dpkg-query", "apt-get"); err != nil {
		t.Fatal(err)
	}
	if err := RequirePrograms(env, "apt-get", "rpm"); err == nil || err.Error() != "rpm not found in PATH" {
		t.Fatalf("RequirePrograms = %v", err)
	}
	// Without a ProgramFinder, the process's PATH is searched.
	if err := RequirePrograms(&Env{Runner: OSRunner{}}, "sh"); err != nil {
		t.Fatal(err)
	}
	if err := RequirePrograms(nil, "manifold-no-such-program"); err == nil {
		t.Fatal("a missing program was found")
	}
}

func TestFactString(t *testing.T) {
	t.Parallel()
	facts := map[string]any{"host": map[string]any{"info": map[string]any{"platformFamily": "debian", "uptime": 5}}}
	for path, want := range map[string]string{
		"host.info.platformFamily":   "debian",
		"host.info.uptime":           "",
		"host.info.missing":          "",
		"host.info.platformFamily.x": "",
		"nope":                       "",
	} {
		if got := FactString(facts, path); got != want {
			t.Errorf("FactString(%q) = %q, want %q", path, got, want)
		}
	}
	if got := FactString(nil, "host"); got != "" {
		t.Errorf("FactString(nil) = %q", got)
	}
}

package user

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

// databases writes a passwd and a group file of the test's own.
func databases(t *testing.T, passwd string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	p, g := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	if err := os.WriteFile(p, []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g, []byte("root:x:0:\nstaff:x:50:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, g
}

// TestProtectedAccounts: root, any account of uid 0 and the account the
// worker runs as are never removed nor renumbered: a validation error for
// what the manifest alone shows, a failure before any command (noop too)
// for what the host's database shows.
func TestProtectedAccounts(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, ensure string
		props        map[string]any
		want         string
	}{
		{"root", "absent", nil, "ensure absent: refusing to remove or renumber a protected account: root (the superuser)"},
		{"root", "present", map[string]any{"uid": 1000}, "uid 1000: refusing to remove or renumber a protected account: root keeps uid 0"},
		{"toor", "absent", map[string]any{"uid": 0}, "ensure absent: refusing to remove or renumber a protected account: uid 0 (the superuser)"},
	} {
		r, err := New(resources.Spec{Type: Type, Name: tt.name, Ensure: tt.ensure, Properties: tt.props})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Validate(); !errors.Is(err, ErrProtectedAccount) || err.Error() != tt.want {
			t.Errorf("%s %s %v: %v, want %q", tt.name, tt.ensure, tt.props, err, tt.want)
		}
	}

	passwd, groups := databases(t, "root:x:0:0:root:/root:/bin/bash\ntoor:x:0:0::/root:/bin/sh\nworker:x:1500:50::/srv/worker:/bin/sh\nalice:x:1001:50::/home/alice:/bin/sh\n")
	for _, tt := range []struct {
		name, ensure string
		props        map[string]any
		want         string
	}{
		{"toor", "absent", nil, "remove toor: refusing to remove or renumber a protected account: uid 0 (the superuser)"},
		{"worker", "absent", map[string]any{"managehome": true}, "remove worker: refusing to remove or renumber a protected account: uid 1500 is the account this worker runs as"},
		{"worker", "present", map[string]any{"uid": 1501}, "renumber worker: refusing to remove or renumber a protected account: uid 1500 is the account this worker runs as"},
		{"toor", "present", map[string]any{"uid": 1502}, "renumber toor: refusing to remove or renumber a protected account: uid 0 (the superuser)"},
	} {
		for _, noop := range []bool{true, false} {
			u := newUser(t, tt.name, tt.ensure, tt.props)
			u.passwdFile, u.groupFile = passwd, groups
			u.selfUID = func() int { return 1500 }
			runner := resources.NewReplayRunner()
			o := resources.Execute(context.Background(), u, &resources.Env{Runner: runner, Noop: noop})
			if o.Status != resources.StatusFailed || !errors.Is(o.Err, ErrProtectedAccount) || !strings.Contains(o.Message, tt.want) {
				t.Errorf("%s %s %v noop %v: %s %q, want %q", tt.name, tt.ensure, tt.props, noop, o.Status, o.Message, tt.want)
			}
			if len(runner.Calls()) != 0 {
				t.Fatalf("ran %v", runner.Calls())
			}
		}
	}
	// Other accounts are removed as before.
	u := newUser(t, "alice", "absent", nil)
	u.passwdFile, u.groupFile = passwd, groups
	u.selfUID = func() int { return 1500 }
	if o := resources.Execute(context.Background(), u, &resources.Env{Noop: true}); o.Status != resources.StatusChanged || o.Message != "would remove" {
		t.Fatalf("alice: %+v", o)
	}
	// With no injection the worker's own uid is the process's.
	me := os.Getuid()
	passwd2, _ := databases(t, fmt.Sprintf("me:x:%d:%d::/nonexistent:/bin/sh\n", me, os.Getgid()))
	u = newUser(t, "me", "absent", nil)
	u.passwdFile, u.groupFile = passwd2, groups
	if o := resources.Execute(context.Background(), u, &resources.Env{Noop: true}); o.Status != resources.StatusFailed || !errors.Is(o.Err, ErrProtectedAccount) {
		t.Fatalf("the process's own account: %+v", o)
	}
}

// TestLinkedHome: a home that is a symbolic link is never created, moved,
// re-owned or removed through: the resource fails (noop too) before any
// command runs, naming the link.
func TestLinkedHome(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	secret := filepath.Join(base, "etc")
	if err := os.Mkdir(secret, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "alice")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(base, "bob")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	passwd, groups := databases(t, fmt.Sprintf("alice:x:1001:50::%s:/bin/sh\nbob:x:1002:50::%s:/bin/sh\n", link, real))
	for _, tt := range []struct {
		name, ensure string
		props        map[string]any
		want         string
	}{
		{"alice", "absent", map[string]any{"managehome": true}, "remove home " + link + ": it is a symlink to " + secret},
		{"alice", "present", map[string]any{"uid": 1003}, "re-own home " + link + ": it is a symlink to " + secret},
		{"alice", "present", map[string]any{"home": real, "managehome": true}, "move home " + link + ": it is a symlink to " + secret},
		{"bob", "present", map[string]any{"home": link, "managehome": true}, "move into home " + link + ": it is a symlink to " + secret},
		{"carol", "present", map[string]any{"home": link, "managehome": true}, "create home " + link + ": it is a symlink to " + secret},
		{"bob", "absent", map[string]any{"managehome": true}, ""},
		{"alice", "absent", nil, ""}, // the home stays: nothing goes through it
	} {
		for _, noop := range []bool{true, false} {
			u := newUser(t, tt.name, tt.ensure, tt.props)
			u.passwdFile, u.groupFile = passwd, groups
			u.selfUID = func() int { return 1500 }
			runner := resources.NewReplayRunner()
			o := resources.Execute(context.Background(), u, &resources.Env{Runner: runner, Noop: noop})
			if tt.want == "" {
				if o.Status != resources.StatusChanged && !(o.Status == resources.StatusFailed && len(runner.Calls()) == 1) {
					t.Errorf("%s %v noop %v: %+v", tt.name, tt.props, noop, o)
				}
				continue
			}
			if o.Status != resources.StatusFailed || !errors.Is(o.Err, ErrLinkedHome) || !strings.Contains(o.Message, tt.want) {
				t.Errorf("%s %s %v noop %v: %s %q, want %q", tt.name, tt.ensure, tt.props, noop, o.Status, o.Message, tt.want)
			}
			if len(runner.Calls()) != 0 {
				t.Fatalf("ran %v", runner.Calls())
			}
		}
	}
	if entries, _ := os.ReadDir(secret); len(entries) != 0 {
		t.Fatalf("the link's target changed: %v", entries)
	}
}

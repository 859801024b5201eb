package user

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/conformance"
	"github.com/manifold-run/manifold/resources/group"
)

// recorder runs commands for real and records them.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) Run(ctx context.Context, c resources.Command) (resources.CommandResult, error) {
	r.mu.Lock()
	r.calls = append(r.calls, strings.Join(c.Argv, " "))
	r.mu.Unlock()
	return resources.OSRunner{}.Run(ctx, c)
}

func (r *recorder) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// realHost skips the test where useradd cannot run: not root, or no
// shadow tools.
func realHost(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("managing users needs root")
	}
	for _, p := range []string{"useradd", "usermod", "userdel", "groupadd", "groupdel"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s not found", p)
		}
	}
}

func sh(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
}

func randomName(t *testing.T) string {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "mfx" + hex.EncodeToString(b)
}

// throwaway returns a name no user or group has; a user and a group of
// that name are removed again when t ends.
func throwaway(t *testing.T) string {
	t.Helper()
	name := randomName(t)
	if _, ok := account(t, name); ok {
		t.Fatalf("user %s already exists", name)
	}
	if _, ok := groupEntry(t, name); ok {
		t.Fatalf("group %s already exists", name)
	}
	t.Cleanup(func() {
		if _, ok := account(t, name); ok {
			if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
				t.Errorf("cleanup: userdel %s: %v: %s", name, err, out)
			}
		}
		if _, ok := groupEntry(t, name); ok {
			if out, err := exec.Command("groupdel", name).CombinedOutput(); err != nil {
				t.Errorf("cleanup: groupdel %s: %v: %s", name, err, out)
			}
		}
	})
	return name
}

// throwawayGroup creates a group, removed when t ends.
func throwawayGroup(t *testing.T) string {
	t.Helper()
	name := throwaway(t)
	sh(t, "groupadd", name)
	return name
}

func account(t *testing.T, name string) (Account, bool) {
	t.Helper()
	all, err := ReadPasswd(DefaultPasswdFile)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(a Account) bool { return a.Name == name })
	if i < 0 {
		return Account{}, false
	}
	return all[i], true
}

func groupEntry(t *testing.T, name string) (group.Entry, bool) {
	t.Helper()
	db, err := group.ReadFile(group.DefaultFile)
	if err != nil {
		t.Fatal(err)
	}
	return db.ByName(name)
}

// freeUID returns a uid no account has, from a range distributions leave
// unallocated.
func freeUID(t *testing.T) uint32 {
	t.Helper()
	all, err := ReadPasswd(DefaultPasswdFile)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 2)
	for range 100 {
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		uid := 61000 + (uint32(b[0])<<8|uint32(b[1]))%4000
		if !slices.ContainsFunc(all, func(a Account) bool { return a.UID == uid }) {
			return uid
		}
	}
	t.Fatal("no free uid")
	return 0
}

// snapshot describes the account, its memberships and its home.
func snapshot(name, home string) func(t *testing.T) string {
	return func(t *testing.T) string {
		a, ok := account(t, name)
		if !ok {
			return "absent"
		}
		db, err := group.ReadFile(group.DefaultFile)
		if err != nil {
			t.Fatal(err)
		}
		s := fmt.Sprintf("%+v groups=%v", a, db.MemberOf(name))
		if home != "" {
			if fi, err := os.Stat(home); err == nil {
				s += fmt.Sprintf(" home=%v", fi.Mode())
			}
		}
		return s
	}
}

func newUser(t *testing.T, name, ensure string, props map[string]any) *User {
	t.Helper()
	r, err := New(resources.Spec{Type: Type, Name: name, Ensure: ensure, Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	return r.(*User)
}

func TestConformanceReal(t *testing.T) {
	realHost(t)
	env := &resources.Env{Runner: resources.OSRunner{}}
	t.Run("present with every property", func(t *testing.T) {
		t.Parallel()
		primary, extra1, extra2 := throwawayGroup(t), throwawayGroup(t), throwawayGroup(t)
		name, uid := throwaway(t), freeUID(t)
		home := filepath.Join(t.TempDir(), "home")
		props := map[string]any{
			"uid": uid, "gid": primary, "groups": []any{extra2, extra1, extra2},
			"home": home, "shell": "/bin/sh", "comment": "Manifold Test,room 1", "managehome": true,
		}
		conformance.Run(t, conformance.Case{
			New: func(t *testing.T) (resources.Resource, *resources.Env) {
				return newUser(t, name, "", props), env
			},
			Snapshot: snapshot(name, home),
		})
		a, _ := account(t, name)
		g, _ := groupEntry(t, primary)
		if a.UID != uid || a.GID != g.GID || a.Home != home || a.Shell != "/bin/sh" || a.Comment != "Manifold Test,room 1" {
			t.Fatalf("account %+v", a)
		}
		db, _ := group.ReadFile(group.DefaultFile)
		if got, want := db.MemberOf(name), []string{extra1, extra2}; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			t.Fatalf("member of %v, want %v", got, want)
		}
		if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
			t.Fatalf("managehome: home not created: %v", err)
		}
	})
	t.Run("present with defaults", func(t *testing.T) {
		t.Parallel()
		name := throwaway(t)
		conformance.Run(t, conformance.Case{
			New: func(t *testing.T) (resources.Resource, *resources.Env) {
				return newUser(t, name, "present", nil), env
			},
			Snapshot: snapshot(name, ""),
		})
		a, _ := account(t, name)
		// useradd -M: the default home is recorded, not created.
		if _, err := os.Stat(a.Home); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("home %s created without managehome: %v", a.Home, err)
		}
	})
	t.Run("system account", func(t *testing.T) {
		t.Parallel()
		name := throwaway(t)
		conformance.Run(t, conformance.Case{
			New: func(t *testing.T) (resources.Resource, *resources.Env) {
				return newUser(t, name, "present", map[string]any{"system": true, "shell": "/usr/sbin/nologin"}), env
			},
			Snapshot: snapshot(name, ""),
		})
		if a, _ := account(t, name); a.UID >= 1000 {
			t.Fatalf("system account got uid %d", a.UID)
		}
	})
	t.Run("absent removes the home with managehome", func(t *testing.T) {
		t.Parallel()
		name := throwaway(t)
		home := filepath.Join(t.TempDir(), "home")
		sh(t, "useradd", "-m", "-d", home, name)
		conformance.Run(t, conformance.Case{
			New: func(t *testing.T) (resources.Resource, *resources.Env) {
				return newUser(t, name, "absent", map[string]any{"managehome": true}), env
			},
			Snapshot: snapshot(name, home),
		})
		if _, err := os.Stat(home); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("home left behind: %v", err)
		}
	})
	t.Run("absent keeps the home without managehome", func(t *testing.T) {
		t.Parallel()
		name := throwaway(t)
		home := filepath.Join(t.TempDir(), "home")
		sh(t, "useradd", "-m", "-d", home, name)
		conformance.Run(t, conformance.Case{
			New: func(t *testing.T) (resources.Resource, *resources.Env) {
				return newUser(t, name, "absent", nil), env
			},
			Snapshot: snapshot(name, ""),
		})
		if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
			t.Fatalf("home removed: %v", err)
		}
	})
}

// TestDriftRepaired changes the shell, the comment and the memberships by
// hand; noop reports it without running anything and one usermod repairs
// it.
func TestDriftRepaired(t *testing.T) {
	realHost(t)
	t.Parallel()
	g1, g2 := throwawayGroup(t), throwawayGroup(t)
	name := throwaway(t)
	ctx := context.Background()
	u := newUser(t, name, "", map[string]any{"shell": "/bin/sh", "comment": "ops", "groups": []any{g1}})
	if o := resources.Execute(ctx, u, &resources.Env{}); o.Status != resources.StatusChanged || o.Message != "created" {
		t.Fatalf("%+v", o)
	}
	sh(t, "usermod", "-s", "/bin/bash", "-c", "changed by hand", "-G", g2, name)

	rec := &recorder{}
	o := resources.Execute(ctx, u, &resources.Env{Runner: rec, Noop: true})
	want := fmt.Sprintf(`would set groups %s (is %s), shell /bin/sh (is /bin/bash), comment "ops" (is "changed by hand")`, g1, g2)
	if o.Status != resources.StatusChanged || o.Message != want {
		t.Fatalf("noop: %+v\nwant %q", o, want)
	}
	if !strings.Contains(o.Diff, "-shell: /bin/bash\n+shell: /bin/sh\n") {
		t.Fatalf("diff %q", o.Diff)
	}
	if len(rec.Calls()) != 0 {
		t.Fatalf("noop ran %v", rec.Calls())
	}
	o = resources.Execute(ctx, u, &resources.Env{Runner: rec})
	if o.Status != resources.StatusChanged || !strings.HasPrefix(o.Message, "set groups "+g1+" (was "+g2+")") {
		t.Fatalf("apply: %+v", o)
	}
	if got, want := rec.Calls(), []string{fmt.Sprintf("usermod -G %s -s /bin/sh -c ops %s", g1, name)}; !slices.Equal(got, want) {
		t.Fatalf("ran %q, want %q", got, want)
	}
	a, _ := account(t, name)
	db, _ := group.ReadFile(group.DefaultFile)
	if a.Shell != "/bin/sh" || a.Comment != "ops" || !slices.Equal(db.MemberOf(name), []string{g1}) {
		t.Fatalf("not repaired: %+v in %v", a, db.MemberOf(name))
	}
	if o := resources.Execute(ctx, u, &resources.Env{}); o.Status != resources.StatusStable {
		t.Fatalf("after repair: %+v", o)
	}

	// An empty groups list removes every supplementary group.
	none := newUser(t, name, "", map[string]any{"groups": []any{}})
	if o := resources.Execute(ctx, none, &resources.Env{}); o.Status != resources.StatusChanged || o.Message != "set groups none (was "+g1+")" {
		t.Fatalf("groups []: %+v", o)
	}
	if db, _ := group.ReadFile(group.DefaultFile); len(db.MemberOf(name)) != 0 {
		t.Fatalf("still member of %v", db.MemberOf(name))
	}
}

// TestUIDAndHomeMove changes the uid and, with managehome, moves the home.
func TestUIDAndHomeMove(t *testing.T) {
	realHost(t)
	t.Parallel()
	name, uid := throwaway(t), freeUID(t)
	dir := t.TempDir()
	oldHome, newHome := filepath.Join(dir, "old"), filepath.Join(dir, "new")
	sh(t, "useradd", "-m", "-d", oldHome, name)
	if err := os.WriteFile(filepath.Join(oldHome, "notes"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	sh(t, "chown", name, filepath.Join(oldHome, "notes"))
	u := newUser(t, name, "", map[string]any{"uid": strconv.Itoa(int(uid)), "home": newHome, "managehome": true})
	o := resources.Execute(context.Background(), u, &resources.Env{})
	if o.Status != resources.StatusChanged || !strings.HasPrefix(o.Message, fmt.Sprintf("set uid %d (was ", uid)) {
		t.Fatalf("%+v", o)
	}
	if b, err := os.ReadFile(filepath.Join(newHome, "notes")); err != nil || string(b) != "kept" {
		t.Fatalf("home not moved: %q %v", b, err)
	}
	if a, _ := account(t, name); a.UID != uid || a.Home != newHome {
		t.Fatalf("account %+v", a)
	}
	fi, err := os.Stat(filepath.Join(newHome, "notes"))
	if err != nil {
		t.Fatal(err)
	}
	if owner := fi.Sys().(*syscall.Stat_t).Uid; owner != uid {
		t.Fatalf("moved file owned by %d, want the new uid %d", owner, uid)
	}
}

// TestExistingGroupOfTheSameName: a group named as the user, created
// first (by a group resource), becomes its primary group.
func TestExistingGroupOfTheSameName(t *testing.T) {
	realHost(t)
	t.Parallel()
	name := throwaway(t)
	sh(t, "groupadd", name)
	o := resources.Execute(context.Background(), newUser(t, name, "", nil), &resources.Env{})
	if o.Status != resources.StatusChanged {
		t.Fatalf("%+v", o)
	}
	a, _ := account(t, name)
	if g, _ := groupEntry(t, name); a.GID != g.GID {
		t.Fatalf("gid %d, want the group's %d", a.GID, g.GID)
	}
}

// TestFailedApply: a missing group fails before anything runs; a uid
// another account has makes useradd fail with its reason. Nothing is
// created either way.
func TestFailedApply(t *testing.T) {
	realHost(t)
	t.Parallel()
	missing := randomName(t)
	for _, tt := range []struct {
		props       map[string]any
		errIs       error
		message     string
		ranCommands bool
	}{
		{map[string]any{"groups": []any{missing}}, group.ErrNotFound, `create: groups: "` + missing + `": no such group in /etc/group`, false},
		{map[string]any{"gid": missing}, group.ErrNotFound, `create: gid "` + missing + `": no such group in /etc/group`, false},
		{map[string]any{"uid": 0}, group.ErrCommandFailed, "UID 0 is not unique", true},
	} {
		name := throwaway(t)
		rec := &recorder{}
		o := resources.Execute(context.Background(), newUser(t, name, "", tt.props), &resources.Env{Runner: rec})
		if o.Status != resources.StatusFailed || !errors.Is(o.Err, tt.errIs) || !strings.Contains(o.Message, tt.message) {
			t.Errorf("%v: %+v, want %q", tt.props, o, tt.message)
		}
		if ran := len(rec.Calls()) > 0; ran != tt.ranCommands {
			t.Errorf("%v: ran %v", tt.props, rec.Calls())
		}
		if _, ok := account(t, name); ok {
			t.Errorf("%v: account created", tt.props)
		}
		// In noop the missing group is only reported.
		o = resources.Execute(context.Background(), newUser(t, name, "", tt.props), &resources.Env{Runner: rec, Noop: true})
		if o.Status != resources.StatusChanged || o.Message != "would create" {
			t.Errorf("noop %v: %+v", tt.props, o)
		}
	}
}

// TestInjectedDatabases reads passwd and group files of the test's own.
func TestInjectedDatabases(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	passwd, groupFile := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	if err := os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/bash\nalice:x:1001:1001:Alice,,,:/home/alice:/bin/bash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(groupFile, []byte("root:x:0:\nalice:x:1001:\nsudo:x:27:alice\nadm:x:4:bob,alice\nstaff:x:50:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runner := resources.NewReplayRunner()
	for _, tt := range []struct {
		name, ensure string
		props        map[string]any
		status       resources.Status
		message      string
	}{
		{"alice", "", map[string]any{"uid": 1001, "gid": "alice", "groups": []any{"sudo", "adm"}, "home": "/home/alice", "shell": "/bin/bash", "comment": "Alice,,,"}, resources.StatusStable, "present, uid 1001"},
		{"alice", "", map[string]any{"gid": 1001}, resources.StatusStable, "present, uid 1001"},
		{"alice", "", map[string]any{"gid": "staff"}, resources.StatusChanged, "would set gid staff (is 1001)"},
		{"alice", "", map[string]any{"gid": "nogroup"}, resources.StatusChanged, "would set gid nogroup (is 1001)"},
		{"alice", "", map[string]any{"groups": []any{"adm"}}, resources.StatusChanged, "would set groups adm (is adm,sudo)"},
		{"alice", "", map[string]any{"comment": ""}, resources.StatusChanged, `would set comment "" (is "Alice,,,")`},
		{"alice", "absent", map[string]any{"managehome": true}, resources.StatusChanged, "would remove with its home"},
		{"bob", "absent", nil, resources.StatusStable, "absent"},
		{"bob", "present", map[string]any{"uid": 1002}, resources.StatusChanged, "would create"},
	} {
		u := newUser(t, tt.name, tt.ensure, tt.props)
		u.passwdFile, u.groupFile = passwd, groupFile
		o := resources.Execute(context.Background(), u, &resources.Env{Runner: runner, Noop: true})
		if o.Status != tt.status || o.Message != tt.message {
			t.Errorf("%s %v: %s %q, want %s %q", tt.name, tt.props, o.Status, o.Message, tt.status, tt.message)
		}
	}
	if len(runner.Calls()) != 0 {
		t.Fatalf("ran %v", runner.Calls())
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("root:x:0:0:root:/root:/bin/bash\nbob:x:nobody:0::/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u := newUser(t, "alice", "", nil)
	u.passwdFile, u.groupFile = bad, groupFile
	o := resources.Execute(context.Background(), u, &resources.Env{Runner: runner})
	if o.Status != resources.StatusFailed || !errors.Is(o.Err, group.ErrMalformedDatabase) || o.Message != "check: "+bad+`:2: malformed account database: uid "nobody" is not a number` {
		t.Fatalf("%+v", o)
	}
}

// TestCommands checks the argv built for each property, so nothing a
// manifest holds is read as an option.
func TestCommands(t *testing.T) {
	t.Parallel()
	u := newUser(t, "alice", "", map[string]any{
		"uid": "1001", "gid": "staff", "groups": []any{"sudo", "adm", "sudo"}, "home": "/srv/alice",
		"shell": "/bin/zsh", "comment": "-Alice", "system": true, "managehome": true,
	})
	got := strings.Join(u.useradd(nil), " ")
	if want := "useradd -u 1001 -g staff -G adm,sudo -d /srv/alice -s /bin/zsh -c -Alice -r -m alice"; got != want {
		t.Fatalf("useradd\n got %s\nwant %s", got, want)
	}
	changes := u.diff(Account{Name: "alice", UID: 1000, GID: 50, Home: "/home/alice", Shell: "/bin/zsh", Comment: "-Alice"},
		group.Database{{Name: "staff", GID: 50}})
	got = strings.Join(u.usermod(changes), " ")
	if want := "usermod -u 1001 -G adm,sudo -d /srv/alice -m alice"; got != want {
		t.Fatalf("usermod\n got %s\nwant %s", got, want)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	many := make([]any, MaxGroups+1)
	for i := range many {
		many[i] = fmt.Sprintf("g%d", i)
	}
	for _, tt := range []struct {
		name   string
		ensure string
		props  map[string]any
		errIs  error
	}{
		{name: "alice"},
		{name: "svc_web-1.2"},
		{name: strings.Repeat("u", group.MaxName)},
		{name: strings.Repeat("u", group.MaxName+1), errIs: group.ErrInvalidName},
		{name: "alice;reboot", errIs: group.ErrInvalidName},
		{name: "$(reboot)", errIs: group.ErrInvalidName},
		{name: "al ice", errIs: group.ErrInvalidName},
		{name: "-alice", errIs: group.ErrInvalidName},
		{name: "1001", errIs: group.ErrInvalidName},
		{name: "", errIs: group.ErrInvalidName},
		{name: "alice", ensure: "locked", errIs: errAny},
		{name: "alice", props: map[string]any{"uid": "abc"}, errIs: group.ErrInvalidID},
		{name: "alice", props: map[string]any{"uid": "1001x"}, errIs: group.ErrInvalidID},
		{name: "alice", props: map[string]any{"uid": -5}, errIs: group.ErrInvalidID},
		{name: "alice", props: map[string]any{"uid": 1e3}},
		{name: "alice", props: map[string]any{"uid": group.MaxID}},
		{name: "alice", props: map[string]any{"uid": uint64(group.MaxID) + 1}, errIs: group.ErrInvalidID},
		{name: "alice", props: map[string]any{"gid": "staff"}},
		{name: "alice", props: map[string]any{"gid": 50}},
		{name: "alice", props: map[string]any{"gid": "staff;id"}, errIs: group.ErrInvalidName},
		{name: "alice", props: map[string]any{"gid": 4294967295}, errIs: group.ErrInvalidID},
		{name: "alice", props: map[string]any{"groups": []any{"sudo", "-G"}}, errIs: group.ErrInvalidName},
		{name: "alice", props: map[string]any{"groups": many[:MaxGroups]}},
		{name: "alice", props: map[string]any{"groups": many}, errIs: ErrTooManyGroups},
		{name: "alice", props: map[string]any{"home": "home/alice"}, errIs: ErrInvalidPath},
		{name: "alice", props: map[string]any{"home": "/home/al:ice"}, errIs: ErrInvalidPath},
		{name: "alice", props: map[string]any{"shell": "/bin/sh\n"}, errIs: ErrInvalidPath},
		{name: "alice", props: map[string]any{"shell": "/" + strings.Repeat("s", MaxPath-1)}},
		{name: "alice", props: map[string]any{"shell": "/" + strings.Repeat("s", MaxPath)}, errIs: ErrInvalidPath},
		{name: "alice", props: map[string]any{"comment": strings.Repeat("c", MaxComment)}},
		{name: "alice", props: map[string]any{"comment": strings.Repeat("c", MaxComment+1)}, errIs: ErrInvalidComment},
		{name: "alice", props: map[string]any{"comment": "a:b"}, errIs: ErrInvalidComment},
	} {
		r, err := New(resources.Spec{Type: Type, Name: tt.name, Ensure: tt.ensure, Properties: tt.props})
		if err != nil {
			t.Fatalf("%q %v: New: %v", tt.name, tt.props, err)
		}
		err = r.Validate()
		switch {
		case tt.errIs == nil && err != nil:
			t.Errorf("%q %v: %v", tt.name, tt.props, err)
		case tt.errIs != nil && err == nil:
			t.Errorf("%q ensure %q %v: accepted", tt.name, tt.ensure, tt.props)
		case tt.errIs != nil && tt.errIs != errAny && !errors.Is(err, tt.errIs):
			t.Errorf("%q %v: %v, want %v", tt.name, tt.props, err, tt.errIs)
		}
	}
	reg := resources.NewRegistry()
	reg.Register(Type, New)
	_, err := reg.New(resources.Spec{Type: Type, Name: "alice", Properties: map[string]any{"uid": "alice"}})
	if want := `user#alice: uid: invalid numeric id: "alice" is not a whole number`; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
	for _, bad := range []resources.Spec{
		{Type: Type, Name: "alice", Properties: map[string]any{"password": "x"}},
		{Type: Type, Name: "alice", Properties: map[string]any{"groups": "sudo"}},
		{Type: Type, Name: "alice", Provider: "ldap"},
	} {
		if _, err := New(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// errAny stands for an error with no sentinel to check.
var errAny = errors.New("any error")

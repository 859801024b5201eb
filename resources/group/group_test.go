package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/conformance"
)

// recorder runs commands for real and records them.
type recorder struct {
	mu    sync.Mutex
	calls [][]string
}

func (r *recorder) Run(ctx context.Context, c resources.Command) (resources.CommandResult, error) {
	r.mu.Lock()
	r.calls = append(r.calls, c.Argv)
	r.mu.Unlock()
	return resources.OSRunner{}.Run(ctx, c)
}

func (r *recorder) Calls() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]string(nil), r.calls...)
}

// realHost skips the test where groupadd cannot run: not root, or no
// shadow tools.
func realHost(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("managing groups needs root")
	}
	for _, p := range []string{"groupadd", "groupmod", "groupdel"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s not found", p)
		}
	}
}

// throwaway returns an unused group name, removed again when t ends.
func throwaway(t *testing.T) string {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	name := "mfx" + hex.EncodeToString(b)
	if _, ok := lookup(t, name); ok {
		t.Fatalf("group %s already exists", name)
	}
	t.Cleanup(func() {
		if _, ok := lookup(t, name); ok {
			if out, err := exec.Command("groupdel", name).CombinedOutput(); err != nil {
				t.Errorf("cleanup: groupdel %s: %v: %s", name, err, out)
			}
		}
	})
	return name
}

func lookup(t *testing.T, name string) (Entry, bool) {
	t.Helper()
	db, err := ReadFile(DefaultFile)
	if err != nil {
		t.Fatal(err)
	}
	return db.ByName(name)
}

// freeGID returns a gid no group has, from a range distributions leave
// unallocated.
func freeGID(t *testing.T) uint32 {
	t.Helper()
	db, err := ReadFile(DefaultFile)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 2)
	for range 100 {
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		gid := 61000 + uint32(b[0])<<8%4000 + uint32(b[1])
		if _, used := db.ByGID(gid); !used {
			return gid
		}
	}
	t.Fatal("no free gid")
	return 0
}

func snapshot(name string) func(t *testing.T) string {
	return func(t *testing.T) string {
		e, ok := lookup(t, name)
		if !ok {
			return "absent"
		}
		return fmt.Sprintf("gid=%d members=%v", e.GID, e.Members)
	}
}

func newGroup(t *testing.T, name, ensure string, props map[string]any) *Group {
	t.Helper()
	r, err := New(resources.Spec{Type: Type, Name: name, Ensure: ensure, Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	return r.(*Group)
}

func TestConformanceReal(t *testing.T) {
	realHost(t)
	t.Run("present with gid", func(t *testing.T) {
		t.Parallel()
		name, gid := throwaway(t), freeGID(t)
		conformance.Run(t, conformance.Case{
			New: func(t *testing.T) (resources.Resource, *resources.Env) {
				return newGroup(t, name, "", map[string]any{"gid": gid}), &resources.Env{Runner: resources.OSRunner{}}
			},
			Snapshot: snapshot(name),
		})
		if e, _ := lookup(t, name); e.GID != gid {
			t.Fatalf("gid %d, want %d", e.GID, gid)
		}
	})
	t.Run("present system group", func(t *testing.T) {
		t.Parallel()
		name := throwaway(t)
		conformance.Run(t, conformance.Case{
			New: func(t *testing.T) (resources.Resource, *resources.Env) {
				return newGroup(t, name, "present", map[string]any{"system": true}), &resources.Env{Runner: resources.OSRunner{}}
			},
			Snapshot: snapshot(name),
		})
		// groupadd -r picks from SYS_GID_MIN..SYS_GID_MAX, below 1000 on
		// every distribution.
		if e, _ := lookup(t, name); e.GID >= 1000 {
			t.Fatalf("system group got gid %d", e.GID)
		}
	})
	t.Run("absent", func(t *testing.T) {
		t.Parallel()
		name := throwaway(t)
		if out, err := exec.Command("groupadd", name).CombinedOutput(); err != nil {
			t.Fatalf("groupadd: %v: %s", err, out)
		}
		conformance.Run(t, conformance.Case{
			New: func(t *testing.T) (resources.Resource, *resources.Env) {
				return newGroup(t, name, "absent", nil), &resources.Env{Runner: resources.OSRunner{}}
			},
			Snapshot: snapshot(name),
		})
		if _, ok := lookup(t, name); ok {
			t.Fatal("still present")
		}
	})
}

// TestDriftRepaired changes the gid by hand; the next apply puts it back,
// and noop before it only reads.
func TestDriftRepaired(t *testing.T) {
	realHost(t)
	t.Parallel()
	name, gid, other := throwaway(t), freeGID(t), freeGID(t)
	if gid == other {
		t.Skip("drew the same gid twice")
	}
	ctx := context.Background()
	g := newGroup(t, name, "present", map[string]any{"gid": strconv.Itoa(int(gid))})
	if o := resources.Execute(ctx, g, &resources.Env{}); o.Status != resources.StatusChanged || o.Message != "created" {
		t.Fatalf("%+v", o)
	}
	if out, err := exec.Command("groupmod", "-g", strconv.Itoa(int(other)), name).CombinedOutput(); err != nil {
		t.Fatalf("groupmod: %v: %s", err, out)
	}
	rec := &recorder{}
	o := resources.Execute(ctx, g, &resources.Env{Runner: rec, Noop: true})
	if want := fmt.Sprintf("would set gid %d (is %d)", gid, other); o.Status != resources.StatusChanged || o.Message != want {
		t.Fatalf("noop: %+v, want %q", o, want)
	}
	if len(rec.Calls()) != 0 {
		t.Fatalf("noop ran %v", rec.Calls())
	}
	o = resources.Execute(ctx, g, &resources.Env{Runner: rec})
	if want := fmt.Sprintf("set gid %d (was %d)", gid, other); o.Status != resources.StatusChanged || o.Message != want {
		t.Fatalf("apply: %+v, want %q", o, want)
	}
	if got := rec.Calls(); len(got) != 1 || strings.Join(got[0], " ") != fmt.Sprintf("groupmod -g %d %s", gid, name) {
		t.Fatalf("ran %v", got)
	}
	if e, _ := lookup(t, name); e.GID != gid {
		t.Fatalf("gid %d, want %d", e.GID, gid)
	}
}

// TestFailedApply: a gid another group holds makes groupadd fail; the
// outcome is failed with groupadd's reason and nothing is created.
func TestFailedApply(t *testing.T) {
	realHost(t)
	t.Parallel()
	name := throwaway(t)
	o := resources.Execute(context.Background(), newGroup(t, name, "", map[string]any{"gid": 0}), &resources.Env{})
	if o.Status != resources.StatusFailed || !errors.Is(o.Err, ErrCommandFailed) {
		t.Fatalf("%+v", o)
	}
	if !strings.Contains(o.Message, "groupadd -g 0 "+name+" exited") || !strings.Contains(o.Message, "GID '0' already exists") {
		t.Fatalf("message %q does not give the reason", o.Message)
	}
	if _, ok := lookup(t, name); ok {
		t.Fatal("group created")
	}
}

// TestRemovePrimaryGroupFails: groupdel refuses to remove a user's
// primary group; the outcome says so and the group stays.
func TestRemovePrimaryGroupFails(t *testing.T) {
	realHost(t)
	t.Parallel()
	name := throwaway(t)
	if out, err := exec.Command("groupadd", name).CombinedOutput(); err != nil {
		t.Fatalf("groupadd: %v: %s", err, out)
	}
	if out, err := exec.Command("useradd", "-M", "-g", name, name).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v: %s", err, out)
	}
	t.Cleanup(func() {
		// Before the group's cleanup (cleanups run last first).
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("cleanup: userdel: %v: %s", err, out)
		}
	})
	o := resources.Execute(context.Background(), newGroup(t, name, "absent", nil), &resources.Env{})
	if o.Status != resources.StatusFailed || !errors.Is(o.Err, ErrCommandFailed) ||
		!strings.Contains(o.Message, "cannot remove the primary group of user '"+name+"'") {
		t.Fatalf("%+v", o)
	}
	if _, ok := lookup(t, name); !ok {
		t.Fatal("group removed")
	}
}

// TestInjectedDatabase reads a group file of the test's own: a group
// already as wanted is stable and runs nothing.
func TestInjectedDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "group")
	if err := os.WriteFile(path, []byte("root:x:0:\nwebops:x:2001:alice,bob\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runner := resources.NewReplayRunner()
	for _, tt := range []struct {
		name, ensure string
		props        map[string]any
		status       resources.Status
		message      string
	}{
		{"webops", "present", map[string]any{"gid": 2001}, resources.StatusStable, "present, gid 2001"},
		{"webops", "present", nil, resources.StatusStable, "present, gid 2001"},
		{"webops", "present", map[string]any{"gid": "2002"}, resources.StatusChanged, "would set gid 2002 (is 2001)"},
		{"webops", "absent", nil, resources.StatusChanged, "would remove"},
		{"devops", "absent", nil, resources.StatusStable, "absent"},
		{"devops", "present", map[string]any{"system": true}, resources.StatusChanged, "would create"},
	} {
		g := newGroup(t, tt.name, tt.ensure, tt.props)
		g.file = path
		o := resources.Execute(context.Background(), g, &resources.Env{Runner: runner, Noop: true})
		if o.Status != tt.status || o.Message != tt.message {
			t.Errorf("%s %s %v: %s %q, want %s %q", tt.name, tt.ensure, tt.props, o.Status, o.Message, tt.status, tt.message)
		}
	}
	if len(runner.Calls()) != 0 {
		t.Fatalf("ran %v", runner.Calls())
	}
	g := newGroup(t, "webops", "", nil)
	g.file = filepath.Join(t.TempDir(), "missing")
	if o := resources.Execute(context.Background(), g, &resources.Env{Runner: runner}); o.Status != resources.StatusFailed || !errors.Is(o.Err, os.ErrNotExist) {
		t.Fatalf("missing database: %+v", o)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, ensure string
		gid          any
		errIs        error
		ok           bool
	}{
		{name: "webops", ok: true},
		{name: "Web_ops.2-x", ok: true},
		{name: "_apt", ok: true},
		{name: "a2", ok: true},
		{name: strings.Repeat("g", MaxName), ok: true},
		{name: strings.Repeat("g", MaxName+1), errIs: ErrInvalidName},
		{name: "", errIs: ErrInvalidName},
		{name: "web;reboot", errIs: ErrInvalidName},
		{name: "$(id)", errIs: ErrInvalidName},
		{name: "`id`", errIs: ErrInvalidName},
		{name: "web ops", errIs: ErrInvalidName},
		{name: "web:ops", errIs: ErrInvalidName},
		{name: "web\nops", errIs: ErrInvalidName},
		{name: "-g", errIs: ErrInvalidName},
		{name: ".hidden", errIs: ErrInvalidName},
		{name: "1234", errIs: ErrInvalidName},
		{name: "wébops", errIs: ErrInvalidName},
		{name: "webops", ensure: "latest"},
		{name: "webops", gid: 0, ok: true},
		{name: "webops", gid: "2001", ok: true},
		{name: "webops", gid: MaxID, ok: true},
		{name: "webops", gid: uint64(MaxID) + 1, errIs: ErrInvalidID},
		{name: "webops", gid: "99999999999999999999", errIs: ErrInvalidID},
		{name: "webops", gid: "abc", errIs: ErrInvalidID},
		{name: "webops", gid: "staff", errIs: ErrInvalidID},
		{name: "webops", gid: -1, errIs: ErrInvalidID},
		{name: "webops", gid: 1.5, errIs: ErrInvalidID},
		{name: "webops", gid: true, errIs: ErrInvalidID},
		{name: "webops", gid: "", ok: true},
	} {
		props := map[string]any{}
		if tt.gid != nil {
			props["gid"] = tt.gid
		}
		r, err := New(resources.Spec{Type: Type, Name: tt.name, Ensure: tt.ensure, Properties: props})
		if err != nil {
			t.Fatalf("%q: New: %v", tt.name, err)
		}
		err = r.Validate()
		switch {
		case tt.ok && err != nil:
			t.Errorf("%q gid %v: %v", tt.name, tt.gid, err)
		case !tt.ok && err == nil:
			t.Errorf("%q ensure %q gid %v: accepted", tt.name, tt.ensure, tt.gid)
		case tt.errIs != nil && !errors.Is(err, tt.errIs):
			t.Errorf("%q gid %v: %v, want %v", tt.name, tt.gid, err, tt.errIs)
		}
	}
	// Errors name the resource's field; the registry adds the reference.
	reg := resources.NewRegistry()
	reg.Register(Type, New)
	_, err := reg.New(resources.Spec{Type: Type, Name: "webops", Properties: map[string]any{"gid": "abc"}})
	if want := `group#webops: gid: invalid numeric id: "abc" is not a whole number`; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
	for _, bad := range []resources.Spec{
		{Type: Type, Name: "webops", Properties: map[string]any{"members": []any{"alice"}}},
		{Type: Type, Name: "webops", Properties: map[string]any{"system": "yes"}},
		{Type: Type, Name: "webops", Provider: "ldap"},
	} {
		if _, err := New(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestReadFile(t *testing.T) {
	t.Parallel()
	dir, n := t.TempDir(), 0
	write := func(content string) string {
		n++
		p := filepath.Join(dir, fmt.Sprint("group", n))
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	db, err := ReadFile(write("# comment\nroot:x:0:\n\n+nisgroup\n-excluded::\nsudo:x:27:alice, bob,\r\nusers:x:100:\nlast:x:4294967294:carol"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(db); got != "[{root 0 []} {sudo 27 [alice bob]} {users 100 []} {last 4294967294 [carol]}]" {
		t.Fatalf("parsed %s", got)
	}
	if got := db.MemberOf("bob"); len(got) != 1 || got[0] != "sudo" {
		t.Fatalf("MemberOf(bob) = %v", got)
	}
	if e, ok := db.ByGID(100); !ok || e.Name != "users" {
		t.Fatalf("ByGID(100) = %v %v", e, ok)
	}
	for content, want := range map[string]string{
		"root:x:0:\nbad:x:0\n":      ":2: malformed account database: 3 fields, want 4",
		"root:x:zero:\n":            ":1: malformed account database: gid \"zero\" is not a number",
		"big:x:4294967296:\n":       ":1: malformed account database: gid \"4294967296\" is not a number",
		"a:x:1:\nb:x:2:\nc:x:3::\n": ":3: malformed account database: 5 fields, want 4",
	} {
		p := write(content)
		_, err := ReadFile(p)
		if !errors.Is(err, ErrMalformedDatabase) || err.Error() != p+want {
			t.Errorf("%q: %v, want %s%s", content, err, p, want)
		}
	}
}

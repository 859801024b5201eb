package coordinator

import (
	"reflect"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/schemas"
)

// TestAssumptions: a noop task carries what its own check needs of what
// the run's resources would create, per target pool, nothing else.
func TestAssumptions(t *testing.T) {
	m := &schemas.Manifest{Resources: []schemas.Resource{
		{Type: "file", Name: "/srv/app", Ensure: "directory", Properties: map[string]any{"mode": "0750"}},
		{Type: "file", Name: "/srv/app/conf", Ensure: "directory"},
		{Type: "file", Name: "/srv/gone", Ensure: "absent"},
		{Type: "file", Name: "/srv/plain"}, // a file, not a directory
		{Type: "user", Name: "app"},
		{Type: "group", Name: "app"},
		{Type: "package", Name: "nginx"},
		{Type: "file", Name: "/other/dir", Ensure: "directory", Target: "db"},
	}}
	a := newAssumptions(m)
	for _, tc := range []struct {
		r    schemas.Resource
		want *bus.Assume
	}{
		{schemas.Resource{Type: "file", Name: "/srv/app/conf/x.yaml", Properties: map[string]any{"owner": "app", "group": "app"}},
			&bus.Assume{Directories: map[string]string{"/srv/app/conf": "", "/srv/app": "0750"}, Users: []string{"app"}, Groups: []string{"app"}}},
		{schemas.Resource{Type: "file", Name: "/srv/plain/x"}, nil},
		{schemas.Resource{Type: "file", Name: "/srv/gone/x"}, nil},
		{schemas.Resource{Type: "file", Name: "/other/dir/x"}, nil}, // another pool's directory
		{schemas.Resource{Type: "file", Name: "/other/dir/x", Target: "db"}, &bus.Assume{Directories: map[string]string{"/other/dir": ""}}},
		{schemas.Resource{Type: "file", Name: "/srv/app/{{ x }}"}, nil},
		{schemas.Resource{Type: "service", Name: "nginx"}, &bus.Assume{Packages: []string{"nginx"}}},
		{schemas.Resource{Type: "service", Name: "sshd"}, nil},
		{schemas.Resource{Type: "user", Name: "bob", Properties: map[string]any{"gid": "app", "groups": []any{"app", "wheel"}}},
			&bus.Assume{Groups: []string{"app"}}},
		{schemas.Resource{Type: "exec", Name: "x", Properties: map[string]any{"cwd": "/srv/app"}},
			&bus.Assume{Directories: map[string]string{"/srv/app": "0750"}}},
	} {
		if got := a.of(&tc.r); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.r.Ref(), got, tc.want)
		}
	}
}

// TestKeepDiffBounds: one diff is cut at resources.MaxDiffBytes with the
// marker; once a run's diffs reach MaxRunDiffBytes the next is replaced
// by a marker, and small ones after it too (the budget is spent).
func TestKeepDiffBounds(t *testing.T) {
	m := &machine{}
	big := strings.Repeat("+0123456789abcdef\n", resources.MaxDiffBytes/18*2)
	d := m.keepDiff(big)
	if len(d) > resources.MaxDiffBytes || !strings.Contains(d, "[manifold: diff truncated: ") {
		t.Fatalf("a diff of %d bytes kept as %d bytes, marker: %v", len(big), len(d), strings.Contains(d, "truncated"))
	}
	kept := len(d)
	n := 1
	for ; m.diffBytes+kept <= MaxRunDiffBytes; n++ {
		if got := m.keepDiff(big); len(got) != kept {
			t.Fatalf("diff %d within the budget changed: %d bytes", n, len(got))
		}
	}
	if got := m.keepDiff(big); !strings.HasPrefix(got, "[manifold: diff dropped: the run's diffs reached") {
		t.Fatalf("diff past the budget kept: %.80q", got)
	}
	if n != MaxRunDiffBytes/kept {
		t.Errorf("kept %d diffs of %d bytes, want %d", n, kept, MaxRunDiffBytes/kept)
	}
	if m.keepDiff("") != "" {
		t.Error("no diff became one")
	}
}

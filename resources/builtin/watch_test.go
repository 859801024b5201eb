package builtin

import (
	"slices"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

// TestWatchTargets: what each watched type says may drift, built through
// the registry as a worker builds it.
func TestWatchTargets(t *testing.T) {
	reg := Registry()
	for _, tc := range []struct {
		spec resources.Spec
		want []resources.WatchTarget // nil: not a watcher or nothing to watch
	}{
		{resources.Spec{Type: "file", Name: "/etc/motd", Properties: map[string]any{"content": "hi\n"}},
			[]resources.WatchTarget{{Path: "/etc/motd"}}},
		{resources.Spec{Type: "file", Name: "/srv/app", Ensure: "directory"},
			[]resources.WatchTarget{{Path: "/srv/app"}}},
		{resources.Spec{Type: "exec", Name: "make install", Properties: map[string]any{"creates": "/usr/local/bin/app"}},
			[]resources.WatchTarget{{Path: "/usr/local/bin/app"}}},
		{resources.Spec{Type: "exec", Name: "date"}, nil},
		{resources.Spec{Type: "archive", Name: "/opt/app.tgz", Properties: map[string]any{
			"url": "https://example.com/app.tgz", "extract_parent": "/opt", "creates": "/opt/app/bin/app", "checksum": ""}},
			[]resources.WatchTarget{{Path: "/opt/app.tgz"}, {Path: "/opt/app/bin/app"}}},
		{resources.Spec{Type: "user", Name: "app"},
			[]resources.WatchTarget{{Path: "/etc/passwd"}, {Path: "/etc/group"}, {Path: "/etc/shadow"}}},
		{resources.Spec{Type: "group", Name: "app"}, []resources.WatchTarget{{Path: "/etc/group"}}},
		{resources.Spec{Type: "package", Name: "nginx", Provider: "apt"}, []resources.WatchTarget{{Path: "/var/lib/dpkg/status"}}},
		{resources.Spec{Type: "package", Name: "nginx"}, []resources.WatchTarget{{Path: "/var/lib/dpkg/status"}, {Path: "/var/lib/rpm", Tree: true}}},
		{resources.Spec{Type: "document", Name: "/etc/app.json", Properties: map[string]any{"content": map[string]any{"a": 1}}},
			[]resources.WatchTarget{{Path: "/etc/app.json"}}},
		{resources.Spec{Type: "document", Name: "kv://app/config", Properties: map[string]any{"content": map[string]any{"a": 1}}},
			[]resources.WatchTarget{{Bucket: "app", Key: "config"}}},
		{resources.Spec{Type: "service", Name: "nginx"}, []resources.WatchTarget{{Unit: "nginx"}}},
		{resources.Spec{Type: "scaffold", Name: "/srv/site", Properties: map[string]any{"source": "templates"}},
			[]resources.WatchTarget{{Path: "/srv/site", Tree: true}}},
	} {
		t.Run(tc.spec.Ref(), func(t *testing.T) {
			r, err := reg.New(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			var got []resources.WatchTarget
			if w, ok := r.(resources.Watcher); ok {
				got = w.WatchTargets()
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("WatchTargets = %+v, want %+v", got, tc.want)
			}
		})
	}
}

package compile

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/schemas"
)

// autoOf returns ref → its automatic requires, for resources that have any.
func autoOf(p *Plan) map[string][]string {
	out := map[string][]string{}
	for _, r := range p.Manifest.Resources {
		if len(r.AutoRequire) > 0 {
			out[r.Ref()] = r.AutoRequire
		}
	}
	return out
}

// requiresOf returns ref → the references of p.Requires.
func requiresOf(p *Plan) map[string][]string {
	out := map[string][]string{}
	for i, deps := range p.Requires {
		for _, j := range deps {
			ref := p.Manifest.Resources[i].Ref()
			out[ref] = append(out[ref], p.Manifest.Resources[j].Ref())
		}
	}
	return out
}

// TestAutoEdges: each kind of implicit dependency becomes a require, only
// when the resource it names is in the manifest; written requires are not
// doubled.
func TestAutoEdges(t *testing.T) {
	t.Parallel()
	p, err := compileSrc(t, "m.yaml", `
ordering: graph
resources:
  - file:
      - /srv/app/conf/site.conf: {content: x, owner: app, group: web}
      - /srv/app/data/db: {content: x, owner: "1001", group: 0}
      - /srv: {ensure: directory}
      - /srv/app/conf: {ensure: directory, owner: nobody}
  - archive:
      - /tmp/app.tgz: {url: "https://example.com/app.tgz", extract_parent: /srv/app/releases, owner: app}
  - exec:
      - build: {command: make, cwd: /srv/app/conf}
      - elsewhere: {command: make, cwd: /opt}
  - user:
      - app: {gid: web, groups: [web, adm, "{{ lookup('data.g', 'x') }}"]}
  - group:
      - web: {}
  - package:
      - nginx: {}
  - service:
      - nginx: {}
      - sshd: {}
      - cron: {require: ["package#cron"]}
  - package:
      - cron: {}
`, Opts{})
	require.NoError(t, err)
	require.Equal(t, map[string][]string{
		"file#/srv/app/conf/site.conf": {"file#/srv/app/conf", "user#app", "group#web"},
		"file#/srv/app/data/db":        {"file#/srv"},
		"file#/srv/app/conf":           {"file#/srv"},
		"archive#/tmp/app.tgz":         {"file#/srv", "user#app"},
		"exec#build":                   {"file#/srv/app/conf"},
		"user#app":                     {"group#web"},
		"service#nginx":                {"package#nginx"},
	}, autoOf(p))
	require.Equal(t, []string{"package#cron"}, requiresOf(p)["service#cron"], "a written require is not doubled")
	require.Equal(t, []string{"file#/srv/app/conf", "user#app", "group#web"}, requiresOf(p)["file#/srv/app/conf/site.conf"])
}

// TestAutoEdgesOff: autoedge: false turns them off to and from a
// resource; a dependency that is ensure: absent or on another target gets
// none.
func TestAutoEdgesOff(t *testing.T) {
	t.Parallel()
	p, err := compileSrc(t, "m.yaml", `
ordering: graph
resources:
  - file:
      - /srv: {ensure: directory}
      - /srv/a: {content: x, autoedge: false}
      - /srv/b: {ensure: directory, autoedge: false}
      - /srv/b/c: {content: x}
      - /srv/d: {content: x, owner: gone}
      - /srv/e: {content: x, group: remote}
  - user:
      - gone: {ensure: absent}
  - group:
      - remote: {target: db}
`, Opts{})
	require.NoError(t, err)
	require.Equal(t, map[string][]string{
		"file#/srv/b/c": {"file#/srv"}, // /srv/b opted out: the next managed ancestor
		"file#/srv/d":   {"file#/srv"},
		"file#/srv/e":   {"file#/srv"},
	}, autoOf(p))
}

// TestAutoEdgesNeverCycle: an automatic edge that would close a cycle is
// not added and the resource says why: against a written require, and
// against declaration order (a file declared before its directory).
func TestAutoEdgesNeverCycle(t *testing.T) {
	t.Parallel()
	p, err := compileSrc(t, "m.yaml", `
ordering: graph
resources:
  - file:
      - /srv/x: {content: x}
      - /srv: {ensure: directory, require: ["file#/srv/x"]}
`, Opts{})
	require.NoError(t, err)
	require.Empty(t, autoOf(p))
	require.Equal(t, []string{"file#/srv (parent directory): would close a cycle: it depends on this resource"},
		p.Manifest.Resources[0].AutoSkipped)

	p, err = compileSrc(t, "m.yaml", `
resources:
  - file:
      - /srv/x: {content: x}
      - /srv: {ensure: directory}
      - /srv/y: {content: x}
`, Opts{})
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"file#/srv/y": {"file#/srv"}}, autoOf(p))
	require.Equal(t, []string{"file#/srv (parent directory): would close a cycle: it is declared later (ordering: manifest); declare it first or use ordering: graph"},
		p.Manifest.Resources[0].AutoSkipped)

	// In graph order the same manifest gets both edges.
	p, err = compileSrc(t, "m.yaml", `
ordering: graph
resources:
  - file:
      - /srv/x: {content: x}
      - /srv: {ensure: directory}
      - /srv/y: {content: x}
`, Opts{})
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"file#/srv/x": {"file#/srv"}, "file#/srv/y": {"file#/srv"}}, autoOf(p))
	requireAcyclic(t, p)
}

// requireAcyclic fails when p's edges (requires, subscribes, declaration
// order) hold a cycle.
func requireAcyclic(t *testing.T, p *Plan) {
	t.Helper()
	g := newReach(p)
	require.True(t, g.acyclic, "the plan's edges hold a cycle")
}

// TestAutoEdgesAtScale: 20,000 files, each under a managed directory,
// compile in bounded time whether the directories come first (declaration
// order: every edge added), last in declaration order (every edge would
// close a cycle) or last in graph order (every edge checked by search).
func TestAutoEdgesAtScale(t *testing.T) {
	t.Parallel()
	const dirs, per = 200, 99
	for _, tc := range []struct {
		ordering  schemas.Ordering
		dirsFirst bool
		want      int
	}{
		{schemas.OrderingManifest, true, dirs * per},
		{schemas.OrderingManifest, false, 0},
		{schemas.OrderingGraph, false, dirs * per},
	} {
		name := fmt.Sprintf("%s, directories first %v", tc.ordering, tc.dirsFirst)
		m := &schemas.Manifest{Ordering: tc.ordering}
		addDirs := func() {
			for d := range dirs {
				m.Resources = append(m.Resources, schemas.Resource{Type: "file", Name: fmt.Sprintf("/srv/d%d", d), Ensure: "directory"})
			}
		}
		if tc.dirsFirst {
			addDirs()
		}
		for d := range dirs {
			for f := range per {
				m.Resources = append(m.Resources, schemas.Resource{Type: "file", Name: fmt.Sprintf("/srv/d%d/f%d", d, f)})
			}
		}
		if !tc.dirsFirst {
			addDirs()
		}
		start := time.Now()
		p := graph(m, nil)
		elapsed := time.Since(start)
		got := 0
		for _, r := range p.Manifest.Resources {
			got += len(r.AutoRequire)
		}
		require.Equal(t, tc.want, got, name)
		require.Less(t, elapsed, 10*time.Second, name)
		requireAcyclic(t, p)
		t.Logf("%s: %d automatic edges among %d resources in %s", name, got, len(m.Resources), elapsed)
	}
}

// TestAutoEdgesOverCleanedNames: a directory written with "//", "." or a
// trailing slash is still the managed parent (names of path types are
// cleaned before the graph; the index of names answers), an absent or
// autoedge: false one is not, and many siblings find theirs.
func TestAutoEdgesOverCleanedNames(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("ordering: graph\nresources:\n  - file:\n")
	b.WriteString("      - /srv//app/./: {ensure: directory}\n")
	b.WriteString("      - /srv/gone: {ensure: absent}\n")
	b.WriteString("      - /srv/manual: {ensure: directory, autoedge: false}\n")
	for i := range 50 {
		fmt.Fprintf(&b, "      - /srv/app/f%d: {content: x}\n", i)
	}
	b.WriteString("      - /srv/gone/x: {content: x}\n      - /srv/manual/y: {content: x}\n      - /srv/app/sub/z: {content: x}\n")
	p, err := compileSrc(t, "m.yaml", b.String(), Opts{})
	require.NoError(t, err)
	want := map[string][]string{"file#/srv/app/sub/z": {"file#/srv/app"}}
	for i := range 50 {
		want[fmt.Sprintf("file#/srv/app/f%d", i)] = []string{"file#/srv/app"}
	}
	require.Equal(t, want, autoOf(p))
}

func TestIsNumeric(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"": true, "0": true, "1001": true, "app": false, "10a": false, "-1": false, " 1": false, "١": false} {
		if got := isNumeric(s); got != want {
			t.Errorf("isNumeric(%q) = %v, want %v", s, got, want)
		}
	}
}

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests below exercise apply resources (child manifests) as a user
// runs them: `manifold apply` bundles the manifest's directory, the
// embedded coordinator starts child runs, and the report nests them. The
// specification is issue 3 and the seeds apply-resource-design.txt and
// ccm-manifest-provider.txt.

// writeTree writes files (slash paths relative to dir → content) under dir,
// with every "$D" in a content replaced by dir, and creates dir/out for the
// files the manifests manage.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(content, "$D", dir)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// child returns the child report nested under apply resource ref.
func (r *report) child(t *testing.T, ref string) *report {
	t.Helper()
	res := r.resource(t, ref)
	if res.Child == nil {
		t.Fatalf("%s: no child report: %+v", ref, res)
	}
	return res.Child
}

// lineCount returns the number of lines of path, 0 when it does not exist.
func lineCount(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestApplyNestedPathResolution is the seed's walk-through: each level's
// relative names (child manifests and file sources) resolve against its own
// manifest's directory, an absolute name against the bundle root; the
// report nests every child report under its apply resource. Both shapes
// (CCM's `- apply: [ {path: {props}} ]` and the flat one) are used.
func TestApplyNestedPathResolution(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml": `
resources:
  - file:
      - $D/out/root.txt: {source: files/level.txt}
  - apply:
      - sub/manifest.yaml: {}
  - {type: apply, name: /common/flat.yaml}
`,
		"files/level.txt": "root dir\n",
		"sub/manifest.yaml": `
resources:
  - file:
      - $D/out/sub.txt: {source: files/level.txt}
  - apply:
      - lib/manifest.yaml: {}
`,
		"sub/files/level.txt": "sub dir\n",
		"sub/lib/manifest.yaml": `
resources:
  - file:
      - $D/out/lib.txt: {source: level.txt}
      - $D/out/lib-up.txt: {source: ../../files/level.txt}
  - apply:
      - /common/flat.yaml: {}
`,
		"sub/lib/level.txt": "lib dir\n",
		"common/flat.yaml":  "resources:\n  - {type: file, name: $D/out/flat.txt, source: flat.txt}\n",
		"common/flat.txt":   "common dir\n",
	})
	m := filepath.Join(dir, "manifest.yaml")

	rep := apply(t, runOpts{dir: dir}, 0, m)
	if rep.Status != "succeeded" || rep.Depth != 0 || rep.Counts != (counts{Total: 3, Changed: 2, Stable: 1}) {
		t.Fatalf("root: want succeeded at depth 0 with 2 changed and 1 stable, got %+v", rep)
	}
	sub := rep.child(t, "apply#sub/manifest.yaml")
	lib := sub.child(t, "apply#lib/manifest.yaml")
	deep := lib.child(t, "apply#/common/flat.yaml")
	flat := rep.child(t, "apply#/common/flat.yaml")
	for _, c := range []struct {
		rep      *report
		manifest string
		depth    int
		counts   counts
	}{
		{sub, "sub/manifest.yaml", 1, counts{Total: 2, Changed: 2}},
		{lib, "lib/manifest.yaml", 2, counts{Total: 3, Changed: 3}},
		{deep, "/common/flat.yaml", 3, counts{Total: 1, Changed: 1}},
		// Applied again from the root after sub's tree created flat.txt.
		{flat, "/common/flat.yaml", 1, counts{Total: 1, Stable: 1}},
	} {
		if c.rep.Manifest != c.manifest || c.rep.Depth != c.depth || c.rep.Counts != c.counts || c.rep.Status != "succeeded" || c.rep.RunID == rep.RunID {
			t.Errorf("child %s: want depth %d, counts %+v, succeeded, own run ID; got %+v", c.manifest, c.depth, c.counts, c.rep)
		}
	}
	if got := rep.resource(t, "apply#sub/manifest.yaml"); got.Status != "changed" || got.Message != "2 of 2 child resources changed" {
		t.Errorf("apply#sub/manifest.yaml: want changed, 2 of 2, got %+v", got)
	}
	if got := rep.resource(t, "apply#/common/flat.yaml"); got.Status != "stable" || got.Message != "all 1 child resources in the desired state" {
		t.Errorf("apply#/common/flat.yaml: want stable, got %+v", got)
	}
	for name, want := range map[string]string{
		"root.txt": "root dir\n", "sub.txt": "sub dir\n", "lib.txt": "lib dir\n", "lib-up.txt": "root dir\n", "flat.txt": "common dir\n",
	} {
		wantFile(t, filepath.Join(dir, "out", name), want, 0o644)
	}

	// From another working directory, and a second time: all stable.
	rep = apply(t, runOpts{}, 0, m)
	if rep.Counts != (counts{Total: 3, Stable: 3}) {
		t.Errorf("second apply: want all stable, got %+v", rep.Counts)
	}
	if got := rep.child(t, "apply#sub/manifest.yaml").child(t, "apply#lib/manifest.yaml").Counts; got != (counts{Total: 3, Stable: 3}) {
		t.Errorf("second apply, lib: want all stable, got %+v", got)
	}
}

// TestApplyPathEscapes: a child manifest outside the manifest's directory
// is refused before anything runs.
func TestApplyPathEscapes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"m.yaml": "resources:\n  - file:\n      - $D/out/never.txt: {content: x}\n  - apply:\n      - ../../etc/x: {}\n",
	})
	r := runWith(t, runOpts{dir: dir}, "apply", filepath.Join(dir, "m.yaml"))
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "escapes the bundle") || !strings.Contains(r.stderr, "../../etc/x") {
		t.Errorf("want an error naming the path that escapes the bundle:\n%s", r)
	}
	wantAbsent(t, filepath.Join(dir, "out", "never.txt"))
}

// TestApplyDepthLimit: with max depth N, runs at depths 0..N run their
// resources and the apply at depth N (starting depth N+1) fails before any
// resource of that child runs, with an error naming the chain of
// manifests; self-application and cycles end quickly with that error.
func TestApplyDepthLimit(t *testing.T) {
	t.Parallel()
	self := map[string]string{"manifest.yaml": `
resources:
  - exec:
      - mark: {command: "echo manifest >> $D/out/levels.log", provider: shell}
  - apply:
      - manifest.yaml: {}
`}
	cycle := map[string]string{
		"a.yaml":   "resources:\n  - exec:\n      - mark: {command: \"echo a >> $D/out/levels.log\", provider: shell}\n  - apply:\n      - b/b.yaml: {}\n",
		"b/b.yaml": "resources:\n  - exec:\n      - mark: {command: \"echo b >> $D/out/levels.log\", provider: shell}\n  - apply:\n      - ../a.yaml: {}\n",
	}
	chain := func(names ...string) string { return strings.Join(names, " → ") }
	repeat := func(name string, n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = name
		}
		return s
	}
	tests := []struct {
		name      string
		files     map[string]string
		entry     string
		args      []string
		max       int
		wantLines string
		wantChain string
	}{
		{name: "self-apply, default depth 10", files: self, entry: "manifest.yaml", max: 10,
			wantLines: strings.Repeat("manifest\n", 11), wantChain: chain(repeat("manifest.yaml", 12)...)},
		{name: "self-apply, --max-depth 2", files: self, entry: "manifest.yaml", args: []string{"--max-depth", "2"}, max: 2,
			wantLines: strings.Repeat("manifest\n", 3), wantChain: chain(repeat("manifest.yaml", 4)...)},
		{name: "two-manifest cycle, --max-depth 3", files: cycle, entry: "a.yaml", args: []string{"--max-depth", "3"}, max: 3,
			wantLines: "a\nb\na\nb\n", wantChain: chain("a.yaml", "b/b.yaml", "a.yaml", "b/b.yaml", "a.yaml")},
		{name: "--max-depth 1", files: cycle, entry: "a.yaml", args: []string{"--max-depth", "1"}, max: 1,
			wantLines: "a\nb\n", wantChain: chain("a.yaml", "b/b.yaml", "a.yaml")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeTree(t, dir, tt.files)
			start := time.Now()
			rep := apply(t, runOpts{dir: dir, timeout: 30 * time.Second}, 1, append(tt.args, filepath.Join(dir, tt.entry))...)
			if took := time.Since(start); took > 15*time.Second {
				t.Errorf("took %s: a cycle must end quickly", took)
			}
			// Every level's marker ran once, none beyond the limit.
			if got := readFile(t, filepath.Join(dir, "out", "levels.log")); got != tt.wantLines {
				t.Errorf("markers: want %q (levels 0..%d), got %q", tt.wantLines, tt.max, got)
			}
			// Walk down: each level's apply failed because its child failed,
			// down to the one at depth max, which started no child.
			level := rep
			for depth := 0; depth < tt.max; depth++ {
				if level.Depth != depth || level.Status != "failed" || level.Counts != (counts{Total: 2, Changed: 1, Failed: 1}) {
					t.Fatalf("depth %d: want failed with the marker changed and the apply failed, got %+v", depth, level)
				}
				a := level.Resources[1]
				if a.Status != "failed" || a.Error != "1 of 2 child resources failed (1 changed, 0 skipped)" {
					t.Errorf("depth %d: %s: want failed with the count, got %+v", depth, a.Ref, a)
				}
				level = level.Resources[1].Child
				if level == nil {
					t.Fatalf("depth %d: no child report", depth+1)
				}
			}
			if level.Depth != tt.max {
				t.Fatalf("deepest run: want depth %d, got %d", tt.max, level.Depth)
			}
			last := level.Resources[1]
			if last.Status != "failed" || last.Child != nil {
				t.Fatalf("the apply at depth %d: want failed without a child run, got %+v", tt.max, last)
			}
			for _, want := range []string{"maximum depth exceeded", "over the limit of " + strconv.Itoa(tt.max), tt.wantChain} {
				if !strings.Contains(last.Error, want) {
					t.Errorf("depth error %q: want it to contain %q", last.Error, want)
				}
			}
		})
	}
}

// TestApplyAllowApply is the seed's transitive-trust table: allow_apply
// false rejects a child manifest holding apply resources before any of its
// resources runs; the other rows run the child.
func TestApplyAllowApply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		allowApply string // the property as written, "" for the default
		nested     bool   // the child contains an apply resource
		wantOK     bool
	}{
		{"", true, true},
		{"", false, true},
		{"allow_apply: true", true, true},
		{"allow_apply: true", false, true},
		{"allow_apply: false", true, false},
		{"allow_apply: false", false, true},
	}
	for _, tt := range tests {
		name := tt.allowApply
		if name == "" {
			name = "default"
		}
		if tt.nested {
			name += ", child has applies"
		} else {
			name += ", child has none"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			child := "resources:\n  - file:\n      - $D/out/child.txt: {content: child}\n"
			if tt.nested {
				child += "  - apply:\n      - leaf.yaml: {}\n"
			}
			writeTree(t, dir, map[string]string{
				"m.yaml": "resources:\n  - apply:\n      - child.yaml: {" + tt.allowApply + "}\n" +
					"  - file:\n      - $D/out/sibling.txt: {content: sibling}\n",
				"child.yaml": child,
				"leaf.yaml":  "resources:\n  - file:\n      - $D/out/leaf.txt: {content: leaf}\n",
			})
			code := 0
			if !tt.wantOK {
				code = 1
			}
			rep := apply(t, runOpts{dir: dir}, code, filepath.Join(dir, "m.yaml"))
			a := rep.resource(t, "apply#child.yaml")
			wantFile(t, filepath.Join(dir, "out", "sibling.txt"), "sibling", 0o644)
			if tt.wantOK {
				if a.Status != "changed" {
					t.Fatalf("want the apply changed, got %+v", a)
				}
				wantFile(t, filepath.Join(dir, "out", "child.txt"), "child", 0o644)
				if tt.nested {
					wantFile(t, filepath.Join(dir, "out", "leaf.txt"), "leaf", 0o644)
				}
				return
			}
			if a.Status != "failed" || !strings.Contains(a.Error, "allow_apply is false") || !strings.Contains(a.Error, "apply#leaf.yaml") {
				t.Errorf("want the apply failed naming the child's apply resource, got %+v", a)
			}
			if a.Child == nil || a.Child.Status != "failed" || len(a.Child.Resources) != 0 {
				t.Errorf("want a rejected child run without resources, got %+v", a.Child)
			}
			wantAbsent(t, filepath.Join(dir, "out", "child.txt"))
			wantAbsent(t, filepath.Join(dir, "out", "leaf.txt"))
		})
	}
}

// TestApplyModes: noop and health-check-only are strengthened, never
// weakened, at every level, and each level's report says which mode it ran
// in. A child in noop under a non-noop parent changes nothing while its
// siblings do.
func TestApplyModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		args        []string
		childProps  string // props of the root's apply of child.yaml
		want        [3][2]bool
		wantWritten [3]bool // root, child, grandchild files
	}{
		{name: "no modes", want: [3][2]bool{}, wantWritten: [3]bool{true, true, true}},
		{name: "--noop reaches every level", args: []string{"--noop"}, childProps: "noop: false",
			want: [3][2]bool{{true, false}, {true, false}, {true, false}}},
		{name: "noop: true on the child, noop: false below cannot weaken it", childProps: "noop: true",
			want: [3][2]bool{{false, false}, {true, false}, {true, false}}, wantWritten: [3]bool{true, false, false}},
		{name: "--health-check-only reaches every level", args: []string{"--health-check-only"}, childProps: "health_check_only: false",
			want: [3][2]bool{{false, true}, {false, true}, {false, true}}},
		{name: "health_check_only: true on the child", childProps: "health_check_only: true",
			want: [3][2]bool{{false, false}, {false, true}, {false, true}}, wantWritten: [3]bool{true, false, false}},
		{name: "both on the child", childProps: "noop: true, health_check_only: true",
			want: [3][2]bool{{false, false}, {true, true}, {true, true}}, wantWritten: [3]bool{true, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{
				"m.yaml": "resources:\n  - apply:\n      - child/m.yaml: {" + tt.childProps + "}\n" +
					"  - file:\n      - $D/out/root.txt: {content: root}\n",
				"child/m.yaml": "resources:\n  - file:\n      - $D/out/child.txt: {content: child}\n" +
					"  - apply:\n      - gc.yaml: {noop: false, health_check_only: false}\n",
				"child/gc.yaml": "resources:\n  - file:\n      - $D/out/gc.txt: {content: gc}\n",
			})
			rep := apply(t, runOpts{dir: dir}, 0, append(tt.args, filepath.Join(dir, "m.yaml"))...)
			child := rep.child(t, "apply#child/m.yaml")
			levels := []*report{rep, child, child.child(t, "apply#gc.yaml")}
			for i, l := range levels {
				if l.Noop != tt.want[i][0] || l.HealthCheckOnly != tt.want[i][1] {
					t.Errorf("level %d: want noop %v, health_check_only %v; got %v, %v", i, tt.want[i][0], tt.want[i][1], l.Noop, l.HealthCheckOnly)
				}
				for _, res := range l.Resources {
					if res.Noop != l.Noop {
						t.Errorf("level %d: %s: noop %v in a run with noop %v", i, res.Ref, res.Noop, l.Noop)
					}
				}
			}
			for i, name := range []string{"root.txt", "child.txt", "gc.txt"} {
				if tt.wantWritten[i] {
					wantFile(t, filepath.Join(dir, "out", name), strings.TrimSuffix(name, ".txt"), 0o644)
				} else {
					wantAbsent(t, filepath.Join(dir, "out", name))
				}
			}
			a := rep.resource(t, "apply#child/m.yaml")
			switch {
			case levels[1].HealthCheckOnly:
				if a.Status != "stable" {
					t.Errorf("health-check-only child: want the apply stable, got %+v", a)
				}
			case levels[1].Noop:
				if a.Status != "changed" || !strings.Contains(a.Message, "would change") {
					t.Errorf("noop child: want the apply reported as would change, got %+v", a)
				}
			}
		})
	}
}

// TestApplyDataPrecedence: at every level the data is the manifest's own,
// then the apply resource's data, then --data, which always wins. A
// parent's data reaches a child only through the apply's data; a child's
// data never leaks back to its parent or siblings.
func TestApplyDataPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml": `
data: {k1: root, k2: root, k3: root, mine: root, pass: root-passed}
resources:
  - apply:
      - child/manifest.yaml:
          data: {k2: apply1, k3: apply1, k6: apply1, passed: "{{ data.pass }}"}
  - file:
      - $D/out/root.txt: {content: "k1={{ data.k1 }} k2={{ data.k2 }} k3={{ data.k3 }} mine={{ data.mine }}"}
  - apply:
      - sibling.yaml: {}
`,
		"child/manifest.yaml": `
data: {k1: child, k2: child, k3: child, k6: child, mine: child, passed: child}
resources:
  - file:
      - $D/out/child.txt: {content: "k1={{ data.k1 }} k2={{ data.k2 }} k3={{ data.k3 }} k6={{ data.k6 }} mine={{ data.mine }} passed={{ data.passed }}"}
  - apply:
      - gc/manifest.yaml:
          data: {k2: apply2, k4: apply2}
`,
		"child/gc/manifest.yaml": `
data: {k1: gc, k2: gc, k3: gc, k4: gc, k5: gc, k6: gc, mine: gc}
resources:
  - file:
      - $D/out/gc.txt: {content: "k1={{ data.k1 }} k2={{ data.k2 }} k3={{ data.k3 }} k4={{ data.k4 }} k5={{ data.k5 }} k6={{ data.k6 }} mine={{ data.mine }}"}
`,
		"sibling.yaml": `
data: {k1: sib, k2: sib, mine: sib}
resources:
  - file:
      - $D/out/sib.txt: {content: "k1={{ data.k1 }} k2={{ data.k2 }} k3={{ data.k3 }} mine={{ data.mine }}"}
`,
	})
	apply(t, runOpts{dir: dir}, 0, "--data", "k3=cli", "--data", "k5=cli", filepath.Join(dir, "manifest.yaml"))
	for name, want := range map[string]string{
		// The child's data and the apply's data do not leak back.
		"root.txt": "k1=root k2=root k3=cli mine=root",
		// Own < apply's data < --data; the root's "mine" does not leak in,
		// its "pass" arrives through the apply's data.
		"child.txt": "k1=child k2=apply1 k3=cli k6=apply1 mine=child passed=root-passed",
		// Depth 2: the child's apply data (apply1) stays at depth 1.
		"gc.txt": "k1=gc k2=apply2 k3=cli k4=apply2 k5=cli k6=gc mine=gc",
		// A sibling apply sees neither the first child's data nor the root's.
		"sib.txt": "k1=sib k2=sib k3=cli mine=sib",
	} {
		wantFile(t, filepath.Join(dir, "out", name), want, 0o644)
	}
}

// TestApplyFailureAndSiblingIsolation: a failing child fails the apply with
// the failure count and its subscriber does not fire; a rejected child
// (allow_apply) fails it too. Siblings after either still see the parent's
// data, noop mode and working directory (relative sources).
func TestApplyFailureAndSiblingIsolation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml": `
data: {who: parent}
resources:
  - apply:
      - failing/manifest.yaml: {data: {who: failing}}
  - exec:
      - notify:
          command: "echo fired >> $D/out/notify.log"
          provider: shell
          refreshonly: true
          subscribe: ["apply#failing/manifest.yaml"]
  - file:
      - $D/out/sib1.txt: {source: level.txt}
      - $D/out/sib2.txt: {content: "who={{ data.who }}"}
  - apply:
      - rejected/manifest.yaml: {noop: true, allow_apply: false, data: {who: rejected}}
  - file:
      - $D/out/sib3.txt: {source: level.txt}
      - $D/out/sib4.txt: {content: "who={{ data.who }}"}
`,
		"level.txt": "parent dir\n",
		"failing/manifest.yaml": `
data: {who: failing-own}
resources:
  - file:
      - $D/out/failing.txt: {source: level.txt}
  - exec:
      - boom: {command: "exit 3", provider: shell}
  - file:
      - $D/out/after-boom.txt: {content: never, require: ["exec#boom"]}
`,
		"failing/level.txt": "failing dir\n",
		"rejected/manifest.yaml": `
resources:
  - file:
      - $D/out/rejected.txt: {source: level.txt}
  - apply:
      - inner.yaml: {}
`,
		"rejected/level.txt":  "rejected dir\n",
		"rejected/inner.yaml": "resources:\n  - file:\n      - $D/out/inner.txt: {content: never}\n",
	})
	rep := apply(t, runOpts{dir: dir}, 1, filepath.Join(dir, "manifest.yaml"))
	if rep.Status != "failed" || rep.Counts != (counts{Total: 7, Changed: 4, Failed: 2, Skipped: 1}) {
		t.Errorf("root: want failed with 4 changed, 2 failed, 1 skipped; got %s %+v", rep.Status, rep.Counts)
	}
	failing := rep.resource(t, "apply#failing/manifest.yaml")
	if failing.Status != "failed" || failing.Error != "1 of 3 child resources failed (1 changed, 1 skipped)" {
		t.Errorf("failing apply: want failed with the count, got %+v", failing)
	}
	if c := failing.Child; c == nil || c.Counts != (counts{Total: 3, Changed: 1, Failed: 1, Skipped: 1}) {
		t.Errorf("failing child: want 1 changed, 1 failed, 1 skipped; got %+v", c)
	}
	if n := rep.resource(t, "exec#notify"); n.Status != "skipped" || n.Message != "skipped: apply#failing/manifest.yaml failed" {
		t.Errorf("subscriber of the failed apply: want skipped, got %+v", n)
	}
	wantAbsent(t, filepath.Join(dir, "out", "notify.log"))
	wantFile(t, filepath.Join(dir, "out", "failing.txt"), "failing dir\n", 0o644)
	wantAbsent(t, filepath.Join(dir, "out", "after-boom.txt"))

	rejected := rep.resource(t, "apply#rejected/manifest.yaml")
	if rejected.Status != "failed" || !strings.Contains(rejected.Error, "allow_apply is false") {
		t.Errorf("rejected apply: want failed by allow_apply, got %+v", rejected)
	}
	wantAbsent(t, filepath.Join(dir, "out", "rejected.txt"))
	wantAbsent(t, filepath.Join(dir, "out", "inner.txt"))

	// Siblings: the parent's working directory, data and (non-)noop mode.
	for _, name := range []string{"sib1.txt", "sib3.txt"} {
		wantFile(t, filepath.Join(dir, "out", name), "parent dir\n", 0o644)
	}
	for _, name := range []string{"sib2.txt", "sib4.txt"} {
		wantFile(t, filepath.Join(dir, "out", name), "who=parent", 0o644)
	}
	for _, ref := range []string{"sib1.txt", "sib2.txt", "sib3.txt", "sib4.txt"} {
		if res := rep.resource(t, "file#"+filepath.Join(dir, "out", ref)); res.Status != "changed" || res.Noop {
			t.Errorf("%s: want changed, not noop; got %+v", ref, res)
		}
	}
}

// TestApplySubscribers: a changed child marks the apply changed, so
// `subscribe: [apply#name]` fires; a stable child does not. In noop the
// subscriber is reported as a would-change refresh and never executed. A
// child forced into noop under a non-noop parent changed nothing, so its
// apply's subscribers do not fire.
func TestApplySubscribers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"m.yaml": `
resources:
  - apply:
      - child.yaml: {}
  - exec:
      - on-change:
          command: "echo fired >> $D/out/fired.log"
          provider: shell
          refreshonly: true
          subscribe: ["apply#child.yaml"]
  - apply:
      - quiet.yaml: {noop: true}
  - exec:
      - on-quiet:
          command: "echo fired >> $D/out/quiet-fired.log"
          provider: shell
          refreshonly: true
          subscribe: ["apply#quiet.yaml"]
`,
		"child.yaml": "resources:\n  - file:\n      - $D/out/child.txt: {content: v1}\n",
		"quiet.yaml": "resources:\n  - file:\n      - $D/out/quiet.txt: {content: v1}\n",
	})
	m := filepath.Join(dir, "m.yaml")
	fired, quietFired := filepath.Join(dir, "out", "fired.log"), filepath.Join(dir, "out", "quiet-fired.log")

	// Noop: would change, would refresh, nothing executed.
	rep := apply(t, runOpts{dir: dir}, 0, "--noop", m)
	if a := rep.resource(t, "apply#child.yaml"); a.Status != "changed" || !a.Noop || a.Message != "1 of 1 child resources would change" {
		t.Errorf("noop: apply: want would change, got %+v", a)
	}
	if s := rep.resource(t, "exec#on-change"); s.Status != "changed" || !s.Refreshed || !s.Noop {
		t.Errorf("noop: subscriber: want a would-change refresh, got %+v", s)
	}
	wantAbsent(t, fired)
	wantAbsent(t, filepath.Join(dir, "out", "child.txt"))

	// Changed child: the subscriber fires once.
	rep = apply(t, runOpts{dir: dir}, 0, m)
	if a := rep.resource(t, "apply#child.yaml"); a.Status != "changed" || a.Message != "1 of 1 child resources changed" {
		t.Errorf("apply: want changed, got %+v", a)
	}
	if s := rep.resource(t, "exec#on-change"); s.Status != "changed" || !s.Refreshed {
		t.Errorf("subscriber: want refreshed, got %+v", s)
	}
	if n := lineCount(t, fired); n != 1 {
		t.Errorf("fired.log: want 1 line, got %d", n)
	}
	// The noop child would change but changed nothing: no refresh.
	if a := rep.resource(t, "apply#quiet.yaml"); a.Status != "changed" || !strings.Contains(a.Message, "would change") {
		t.Errorf("noop child: want would change, got %+v", a)
	}
	if s := rep.resource(t, "exec#on-quiet"); s.Status != "stable" || s.Refreshed {
		t.Errorf("subscriber of a noop child: want stable, not refreshed; got %+v", s)
	}
	wantAbsent(t, quietFired)
	wantAbsent(t, filepath.Join(dir, "out", "quiet.txt"))

	// Stable child: no refresh.
	rep = apply(t, runOpts{dir: dir}, 0, m)
	if a := rep.resource(t, "apply#child.yaml"); a.Status != "stable" {
		t.Errorf("second apply: want the apply stable, got %+v", a)
	}
	if s := rep.resource(t, "exec#on-change"); s.Status != "stable" || s.Refreshed {
		t.Errorf("second apply: subscriber: want stable, got %+v", s)
	}
	if n := lineCount(t, fired); n != 1 {
		t.Errorf("fired.log after a stable child: want still 1 line, got %d", n)
	}
}

// TestApplySharedSession: a child run belongs to its parent's session: its
// resources may require or subscribe to resources of the parent that
// already finished (by name or alias), a failed one skips them, and the
// parent subscribes to the apply.
func TestApplySharedSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"m.yaml": `
resources:
  - file:
      - $D/out/base.conf: {content: base, alias: base}
  - exec:
      - broken: {command: "exit 1", provider: shell}
  - apply:
      - child.yaml: {}
  - exec:
      - parent-refresh:
          command: "echo fired >> $D/out/parent.log"
          provider: shell
          refreshonly: true
          subscribe: ["apply#child.yaml"]
`,
		"child.yaml": `
resources:
  - exec:
      - reload:
          command: "echo reload >> $D/out/reload.log"
          provider: shell
          refreshonly: true
          subscribe: ["file#base"]
      - needs-base:
          command: "echo ok >> $D/out/needs.log"
          provider: shell
          require: ["file#$D/out/base.conf"]
      - needs-broken:
          command: "echo never >> $D/out/never.log"
          provider: shell
          require: ["exec#broken"]
`,
	})
	rep := apply(t, runOpts{dir: dir}, 1, filepath.Join(dir, "m.yaml"))
	child := rep.child(t, "apply#child.yaml")
	if s := child.statuses(); s["exec#reload"] != "changed" || s["exec#needs-base"] != "changed" || s["exec#needs-broken"] != "skipped" {
		t.Errorf("child: want reload and needs-base changed, needs-broken skipped; got %v", s)
	}
	if r := child.resource(t, "exec#reload"); !r.Refreshed {
		t.Errorf("child exec#reload: want refreshed by the parent's file#base, got %+v", r)
	}
	if r := child.resource(t, "exec#needs-broken"); r.Message != "skipped: exec#broken failed" {
		t.Errorf("child exec#needs-broken: want skipped naming the parent's failed resource, got %+v", r)
	}
	if a := rep.resource(t, "apply#child.yaml"); a.Status != "changed" || a.Message != "2 of 3 child resources changed" {
		t.Errorf("apply: want changed, got %+v", a)
	}
	if s := rep.resource(t, "exec#parent-refresh"); s.Status != "changed" || !s.Refreshed {
		t.Errorf("parent subscriber of apply#child.yaml: want refreshed, got %+v", s)
	}
	for name, n := range map[string]int{"reload.log": 1, "needs.log": 1, "parent.log": 1, "never.log": 0} {
		if got := lineCount(t, filepath.Join(dir, "out", name)); got != n {
			t.Errorf("%s: want %d lines, got %d", name, n, got)
		}
	}
}

// TestApplyLogging: child log lines carry manifest=<apply name>, at the
// seed's levels: all succeeded → info, some changed → warning, any failed →
// error.
func TestApplyLogging(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"m.yaml": `
resources:
  - apply:
      - stable.yaml: {}
      - changed.yaml: {}
      - failed.yaml: {}
`,
		"out/stable.txt": "stable",
		"stable.yaml":    "resources:\n  - file:\n      - $D/out/stable.txt: {content: stable}\n",
		"changed.yaml":   "resources:\n  - file:\n      - $D/out/changed.txt: {content: changed}\n",
		"failed.yaml":    "resources:\n  - exec:\n      - boom: {command: \"exit 2\", provider: shell}\n",
	})
	r := runWith(t, runOpts{dir: dir}, "apply", "--log-level", "info", filepath.Join(dir, "m.yaml"))
	wantCode(t, r, 1)
	for _, want := range []struct{ level, msg, manifest string }{
		{"INFO", "apply: all child resources succeeded", "stable.yaml"},
		{"WARN", "apply changed resources", "changed.yaml"},
		{"ERROR", "apply failed", "failed.yaml"},
	} {
		re := regexp.MustCompile(`(?m)^.*level=` + want.level + ` msg="` + regexp.QuoteMeta(want.msg) + `".* manifest=` + regexp.QuoteMeta(want.manifest) + `( |$).*$`)
		if !re.MatchString(r.stderr) {
			t.Errorf("want a %s line %q with manifest=%s:\n%s", want.level, want.msg, want.manifest, r.stderr)
		}
	}
	// The worker's lines about a child's resources name the child manifest.
	re := regexp.MustCompile(`(?m)^.*msg="task changed".* resource=file#` + regexp.QuoteMeta(filepath.Join(dir, "out", "changed.txt")) + ` manifest=changed\.yaml( |$)`)
	if !re.MatchString(r.stderr) {
		t.Errorf("want the worker's line for the child's file with manifest=changed.yaml:\n%s", r.stderr)
	}
}

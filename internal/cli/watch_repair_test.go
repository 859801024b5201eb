package cli

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/internal/compile"
	"github.com/manifold-run/manifold/schemas"
)

// TestRepairPlanSpreadsIndependentFiles: a repair run of at least
// minSpreadRepair independent files runs in ordering: graph (its segments
// side by side on the worker's slots); a smaller one, or one holding a
// directory, a subscriber, a source or a requirement keeps the
// manifest's ordering.
func TestRepairPlanSpreadsIndependentFiles(t *testing.T) {
	const n = minSpreadRepair + 6
	var m strings.Builder
	m.WriteString("resources:\n  - file:\n      - /srv/d:\n          ensure: directory\n")
	refs := make([]string, n)
	for i := range n {
		path := fmt.Sprintf("/srv/d/f%03d", i)
		refs[i] = "file#" + path
		fmt.Fprintf(&m, "      - %s:\n          content: \"managed\\n\"\n", path)
	}
	m.WriteString("      - /srv/d/src:\n          source: a.txt\n")
	m.WriteString("      - /srv/d/after:\n          content: x\n          require: [file#/srv/d/f000]\n")
	m.WriteString("  - exec:\n      - reload:\n          command: /bin/true\n          subscribe: [file#/srv/d/f001]\n")
	plan, err := compile.Source("site.yaml", []byte(m.String()), compile.Opts{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		keys []string
		want schemas.Ordering
	}{
		{"independent files", refs[2:], schemas.OrderingGraph},
		{"too few", refs[2 : minSpreadRepair+1], schemas.OrderingManifest},
		{"with a directory", append([]string{"file#/srv/d"}, refs[2:]...), schemas.OrderingManifest},
		{"with a subscriber's file", refs[1:], schemas.OrderingManifest}, // exec#reload joins
		{"with a source", append(refs[2:], "file#/srv/d/src"), schemas.OrderingManifest},
		{"with a requirement", append(refs[:1:1], append(refs[2:], "file#/srv/d/after")...), schemas.OrderingManifest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := repairPlan(plan, tc.keys)
			if err != nil {
				t.Fatal(err)
			}
			if got := sub.Manifest.Ordering; got != tc.want {
				t.Fatalf("ordering %q, want %q", got, tc.want)
			}
			want, err := compile.SubsetRefs(plan, tc.keys)
			if err != nil {
				t.Fatal(err)
			}
			if len(sub.Manifest.Resources) != len(want) {
				t.Fatalf("%d resources, want %d", len(sub.Manifest.Resources), len(want))
			}
			for i, r := range sub.Manifest.Resources {
				if r.Ref() != want[i] {
					t.Fatalf("resource %d is %s, want %s", i, r.Ref(), want[i])
				}
			}
		})
	}
	if plan.Manifest.Ordering != schemas.OrderingManifest {
		t.Errorf("the watch's own plan changed: ordering %q", plan.Manifest.Ordering)
	}
}

// TestRepairPlanGroupsByDirectory: a spread repair run of files that the
// manifest interleaves over several directories holds them grouped by
// directory, in manifest order within each (a segment of the run then
// opens one or two directories, not one per file), each key once; a run
// that keeps the manifest's ordering keeps its order.
func TestRepairPlanGroupsByDirectory(t *testing.T) {
	const n = 2 * minSpreadRepair
	var m strings.Builder
	m.WriteString("resources:\n  - file:\n")
	refs := make([]string, n)
	for i := range n {
		path := fmt.Sprintf("/srv/d%d/f%03d", i%3, i)
		refs[i] = "file#" + path
		fmt.Fprintf(&m, "      - %s:\n          content: \"managed\\n\"\n", path)
	}
	plan, err := compile.Source("site.yaml", []byte(m.String()), compile.Opts{})
	if err != nil {
		t.Fatal(err)
	}
	// Hinted in another order than the manifest's: the plan's decides.
	keys := slices.Clone(refs)
	slices.Reverse(keys)
	sub, err := repairPlan(plan, keys)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Manifest.Ordering != schemas.OrderingGraph {
		t.Fatalf("ordering %q", sub.Manifest.Ordering)
	}
	var want []string
	for d := range 3 {
		for i := d; i < n; i += 3 {
			want = append(want, refs[i])
		}
	}
	var got []string
	for _, r := range sub.Manifest.Resources {
		got = append(got, r.Ref())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("resources\n%v\nwant\n%v", got, want)
	}
	for i := range sub.Manifest.Resources {
		if len(sub.Requires[i]) > 0 || len(sub.Subscribes[i]) > 0 || (len(sub.After) > i && sub.After[i] >= 0) {
			t.Fatalf("resource %d has edges: requires %v, subscribes %v, after %v", i, sub.Requires[i], sub.Subscribes[i], sub.After)
		}
	}
	small, err := repairPlan(plan, refs[:minSpreadRepair-1])
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range small.Manifest.Resources {
		if r.Ref() != refs[i] {
			t.Fatalf("unspread run: resource %d is %s, want %s", i, r.Ref(), refs[i])
		}
	}
	if plan.Manifest.Resources[1].Ref() != refs[1] {
		t.Errorf("the watch's own plan was reordered")
	}
}

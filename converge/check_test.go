package converge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/resources/safefs"
)

// fakeRes is a resource whose check reports drift when drifted is set.
type fakeRes struct {
	drifted bool
	err     error
	checks  int
}

func (f *fakeRes) Validate() error { return nil }
func (f *fakeRes) CheckApply(_ context.Context, _ *resources.Env, apply bool) (resources.Result, error) {
	if apply {
		panic("an interval pass applied")
	}
	f.checks++
	return resources.Result{Changed: f.drifted, Message: "update content"}, f.err
}

func TestCheckFirst(t *testing.T) {
	t.Parallel()
	a, b, c := &fakeRes{}, &fakeRes{}, &fakeRes{}
	checks := []LocalCheck{{Key: "file#a", Res: a}, {Key: "file#b", Res: b}, {Key: "file#c", Res: c}}
	var runs []Trigger
	inner := RunnerFunc(func(_ context.Context, t Trigger) (RunResult, error) {
		runs = append(runs, t)
		return RunResult{Changed: t.Keys}, nil
	})
	var passes []PassResult
	r := CheckFirst(func() []LocalCheck { return checks }, inner, func(p PassResult) { passes = append(passes, p) })
	ctx := context.Background()

	// A clean pass: every resource checked once, no run.
	res, err := r.Converge(ctx, Trigger{Kind: TriggerInterval})
	if err != nil || len(runs) != 0 || len(res.Stable) != 3 || a.checks+b.checks+c.checks != 3 {
		t.Fatalf("clean pass: runs %v, result %+v, err %v, checks %d %d %d", runs, res, err, a.checks, b.checks, c.checks)
	}
	if len(passes) != 1 || passes[0].Checked != 3 || len(passes[0].Drifted) != 0 {
		t.Fatalf("passes %+v", passes)
	}

	// b drifted, c fails its check: one run of those two, trigger interval.
	b.drifted, c.err = true, errors.New("permission denied")
	res, err = r.Converge(ctx, Trigger{Kind: TriggerInterval})
	if err != nil || len(runs) != 1 {
		t.Fatalf("drift pass: %d runs, err %v", len(runs), err)
	}
	if got := runs[0]; got.Kind != TriggerInterval || !slices.Equal(got.Keys, []string{"file#b", "file#c"}) ||
		got.Why["file#b"] != "drifted: update content" || got.Why["file#c"] != "check failed: permission denied" {
		t.Fatalf("run %+v", got)
	}
	if !slices.Equal(res.Changed, []string{"file#b", "file#c"}) || !slices.Equal(res.Stable, []string{"file#a"}) {
		t.Fatalf("result %+v", res)
	}

	// A resource that cannot be checked here always goes to the run.
	b.drifted, c.err = false, nil
	checks = append(checks, LocalCheck{Key: "apply#child"})
	if _, err := r.Converge(ctx, Trigger{Kind: TriggerInterval}); err != nil || len(runs) != 2 || !slices.Equal(runs[1].Keys, []string{"apply#child"}) {
		t.Fatalf("runs %+v, err %v", runs, err)
	}

	// Other triggers go to the runner as they are, without a pass.
	before := a.checks
	for _, tr := range []Trigger{{Kind: TriggerStart}, {Kind: TriggerDrift, Why: map[string]string{"": "event queue overflow"}}, {Kind: TriggerHealth, HealthOnly: true}} {
		if _, err := r.Converge(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	if a.checks != before || len(runs) != 5 || runs[2].Kind != TriggerStart || runs[3].Kind != TriggerDrift || runs[4].Kind != TriggerHealth {
		t.Fatalf("pass-through: checks %d→%d, runs %+v", before, a.checks, runs)
	}
}

// TestCheckFirstDrift: a drift batch is checked here first; only the keys
// that drifted (or cannot be checked here) go to a run, with their hints'
// reasons. Hints of a run's own writes find the resources stable: no run.
func TestCheckFirstDrift(t *testing.T) {
	t.Parallel()
	a, b := &fakeRes{}, &fakeRes{}
	checks := []LocalCheck{{Key: "file#a", Res: a}, {Key: "file#b", Res: b}, {Key: "apply#child"}}
	var runs []Trigger
	inner := RunnerFunc(func(_ context.Context, t Trigger) (RunResult, error) {
		runs = append(runs, t)
		return RunResult{Changed: t.Keys}, nil
	})
	r := CheckFirst(func() []LocalCheck { return checks }, inner, func(p PassResult) { t.Fatalf("a drift batch reported as an interval pass: %+v", p) })
	ctx := context.Background()

	// Both hinted (a twice), both stable: each checked once, no run.
	res, err := r.Converge(ctx, Trigger{Kind: TriggerDrift, Keys: []string{"file#a", "file#b", "file#a"}, Why: map[string]string{"file#a": "write a", "file#b": "write b"}})
	if err != nil || len(runs) != 0 || a.checks != 1 || b.checks != 1 || !slices.Equal(res.Stable, []string{"file#a", "file#b"}) {
		t.Fatalf("own writes: runs %+v, result %+v, err %v, checks %d %d", runs, res, err, a.checks, b.checks)
	}

	// b drifted: a run of b only, with its hint's reason; a is stable.
	b.drifted = true
	res, err = r.Converge(ctx, Trigger{Kind: TriggerDrift, Keys: []string{"file#b", "file#a"}, Why: map[string]string{"file#a": "write a", "file#b": "chmod b"}})
	if err != nil || len(runs) != 1 || !slices.Equal(runs[0].Keys, []string{"file#b"}) || runs[0].Kind != TriggerDrift || runs[0].Why["file#b"] != "chmod b" {
		t.Fatalf("drift: runs %+v, err %v", runs, err)
	}
	if !slices.Equal(res.Changed, []string{"file#b"}) || !slices.Equal(res.Stable, []string{"file#a"}) || a.checks != 2 || b.checks != 2 {
		t.Fatalf("drift: result %+v, checks %d %d", res, a.checks, b.checks)
	}

	// Keys not checkable here (no resource; unknown to the plan) always
	// go to the run.
	b.drifted = false
	if _, err := r.Converge(ctx, Trigger{Kind: TriggerDrift, Keys: []string{"apply#child", "file#gone", "file#a"}}); err != nil || len(runs) != 2 ||
		!slices.Equal(runs[1].Keys, []string{"apply#child", "file#gone"}) || runs[1].Why["file#gone"] != "not checkable locally" {
		t.Fatalf("uncheckable: runs %+v, err %v", runs, err)
	}
}

// dirRes is a file-like resource at path that records the order of its
// checks and whether the check's context carried a directory cache.
type dirRes struct {
	path   string
	seen   *[]string
	cached *int
}

func (d *dirRes) Validate() error { return nil }
func (d *dirRes) WatchTargets() []resources.WatchTarget {
	return []resources.WatchTarget{{Path: d.path}}
}
func (d *dirRes) CheckApply(ctx context.Context, _ *resources.Env, _ bool) (resources.Result, error) {
	*d.seen = append(*d.seen, d.path)
	if safefs.DirsFrom(ctx) != nil {
		*d.cached++
	}
	return resources.Result{Changed: strings.HasSuffix(d.path, "x")}, nil
}

// TestPassGroupsByDirectory: a pass visits the resources of one directory
// together under a directory cache (one walk per directory, not per
// file), and still reports in plan order.
func TestPassGroupsByDirectory(t *testing.T) {
	t.Parallel()
	var seen []string
	cached := 0
	var checks []LocalCheck
	for _, p := range []string{"/b/1", "/a/1x", "/b/2", "/a/2", "/b/3x", "/c/1"} {
		checks = append(checks, LocalCheck{Key: "file#" + p, Res: &dirRes{path: p, seen: &seen, cached: &cached}})
	}
	res := NewPass(checks).Run(context.Background())
	if want := []string{"/a/1x", "/a/2", "/b/1", "/b/2", "/b/3x", "/c/1"}; !slices.Equal(seen, want) {
		t.Fatalf("checked in order %v, want %v", seen, want)
	}
	if cached != len(checks) {
		t.Fatalf("%d of %d checks had a directory cache", cached, len(checks))
	}
	if !slices.Equal(res.Drifted, []string{"file#/a/1x", "file#/b/3x"}) || !slices.Equal(res.Stable, []string{"file#/b/1", "file#/b/2", "file#/a/2", "file#/c/1"}) || res.Checked != 6 {
		t.Fatalf("result %+v", res)
	}
}

// TestPassRealFiles: a pass over real file resources in more directories
// than one directory cache keeps (safefs.MaxCachedDirs) finds exactly the
// drifted files, in plan order; the next pass walks afresh (a directory
// replaced by another between passes is seen: no descriptor is kept
// across passes).
func TestPassRealFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	reg := builtin.Registry()
	env := &resources.Env{WorkDir: root, Root: root, Runner: resources.OSRunner{}}
	ndirs := 2*safefs.MaxCachedDirs + 3
	var checks []LocalCheck
	var paths []string
	for i := range 3 * ndirs {
		d := filepath.Join(root, fmt.Sprintf("d%03d", i%ndirs))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d, fmt.Sprintf("f%04d", i))
		if err := os.WriteFile(p, []byte("managed\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := reg.New(resources.Spec{Type: "file", Name: p, Properties: map[string]any{"content": "managed\n"}})
		if err != nil {
			t.Fatal(err)
		}
		checks = append(checks, LocalCheck{Key: "file#" + p, Res: res, Env: env})
		paths = append(paths, p)
	}
	pass := NewPass(checks)
	if res := pass.Run(context.Background()); len(res.Drifted) != 0 || len(res.Stable) != len(checks) {
		t.Fatalf("converged files: drifted %v (%v), stable %d of %d", res.Drifted, res.Why, len(res.Stable), len(checks))
	}
	// Edits in the first, a middle and the last directory, listed in
	// plan order.
	edited := []int{len(paths) - 1, 5, 2*safefs.MaxCachedDirs + 1, 0}
	for _, i := range edited {
		if err := os.WriteFile(paths[i], []byte("edited\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A directory replaced between passes: its file is gone.
	moved := filepath.Dir(paths[7])
	if err := os.Rename(moved, moved+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(moved, 0o755); err != nil {
		t.Fatal(err)
	}
	res := pass.Run(context.Background())
	var want []string
	for i, p := range paths {
		if slices.Contains(edited, i) || filepath.Dir(p) == moved {
			want = append(want, "file#"+p)
		}
	}
	if !slices.Equal(res.Drifted, want) || len(res.Stable) != len(checks)-len(want) {
		t.Fatalf("drifted %v, want %v", res.Drifted, want)
	}
	if why := res.Why["file#"+paths[5]]; !strings.Contains(why, "content") {
		t.Fatalf("why %q", why)
	}
}

// BenchmarkCheckPassOverhead is the pass's own cost per resource around a
// check that does nothing (the loop, the result): what the interval pass
// adds to the checks themselves, the Pass prepared once as the watch does.
func BenchmarkCheckPassOverhead(b *testing.B) {
	checks := make([]LocalCheck, 20000)
	for i := range checks {
		checks[i] = LocalCheck{Key: "file#/x", Res: &fakeRes{}}
	}
	pass := NewPass(checks)
	b.ReportAllocs()
	for b.Loop() {
		pass.Run(context.Background())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(checks)), "ns/resource")
}

// TestPassSplitsLargePasses: a pass of at least minSplitPass checks is
// checked in parts side by side, cut where the directory changes, every
// check in exactly one part; the result is the same as one part's, in
// plan order, drifted files with their reasons.
func TestPassSplitsLargePasses(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	reg := builtin.Registry()
	env := &resources.Env{WorkDir: root, Root: root, Runner: resources.OSRunner{}}
	const n, ndirs = 2 * minSplitPass, 37
	var checks []LocalCheck
	var paths []string
	for i := range n {
		d := filepath.Join(root, fmt.Sprintf("d%03d", i%ndirs))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d, fmt.Sprintf("f%05d", i))
		content := "managed\n"
		if i%97 == 0 {
			content = "edited\n"
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := reg.New(resources.Spec{Type: "file", Name: p, Properties: map[string]any{"content": "managed\n"}})
		if err != nil {
			t.Fatal(err)
		}
		checks = append(checks, LocalCheck{Key: "file#" + p, Res: res, Env: env})
		paths = append(paths, p)
	}
	pass := NewPass(checks)

	for _, parts := range [][][2]int{pass.split(nil), pass.splitInto(nil, 2, n), pass.splitInto(nil, 4, n)} {
		if len(parts) < 2 {
			t.Fatalf("a pass of %d checks in %d part(s)", n, len(parts))
		}
		seen := make([]int, n)
		for k, part := range parts {
			if k > 0 && part[0] != parts[k-1][1] {
				t.Fatalf("parts %v do not follow each other", parts)
			}
			if part[0] > 0 && pass.group[part[0]] == pass.group[part[0]-1] {
				t.Fatalf("part %v cuts a directory in two", part)
			}
			for j := part[0]; j < part[1]; j++ {
				seen[pass.order[j]]++
			}
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("check %d in %d parts of %v", i, c, parts)
			}
		}
	}
	// Fewer than minSplitPass wanted: one part.
	want := make([]bool, n)
	for i := range minSplitPass - 1 {
		want[i] = true
	}
	if parts := pass.split(want); len(parts) != 1 {
		t.Fatalf("%d wanted checks in %d parts, want 1", minSplitPass-1, len(parts))
	}

	res := pass.Run(context.Background())
	var drifted, stable []string
	for i, p := range paths {
		if i%97 == 0 {
			drifted = append(drifted, "file#"+p)
		} else {
			stable = append(stable, "file#"+p)
		}
	}
	if !slices.Equal(res.Drifted, drifted) || !slices.Equal(res.Stable, stable) || res.Checked != n {
		t.Fatalf("split pass: %d drifted, %d stable, %d checked; want %d, %d, %d", len(res.Drifted), len(res.Stable), res.Checked, len(drifted), len(stable), n)
	}
	for _, k := range drifted {
		if !strings.HasPrefix(res.Why[k], "drifted: ") {
			t.Fatalf("%s: why %q", k, res.Why[k])
		}
	}
}

// TestCheckFirstStormSample: a drift batch of minSampledBatch keys or more
// whose sample nearly all drifted goes to the run whole, only the sample
// checked here; one whose sample is stable (a run's own writes) is checked
// here whole, and no run is asked for.
func TestCheckFirstStormSample(t *testing.T) {
	t.Parallel()
	const n = minSampledBatch + 100
	res := make([]*fakeRes, n)
	checks := make([]LocalCheck, n)
	keys := make([]string, n)
	why := map[string]string{}
	for i := range res {
		res[i] = &fakeRes{drifted: true}
		keys[i] = fmt.Sprintf("file#%d", i)
		checks[i] = LocalCheck{Key: keys[i], Res: res[i]}
		why[keys[i]] = "write"
	}
	var runs []Trigger
	inner := RunnerFunc(func(_ context.Context, t Trigger) (RunResult, error) {
		runs = append(runs, t)
		return RunResult{Changed: t.Keys}, nil
	})
	r := CheckFirst(func() []LocalCheck { return checks }, inner, nil)
	checked := func() (c int) {
		for _, f := range res {
			c += f.checks
		}
		return c
	}

	// A storm: every key drifted. Only the sample is checked here.
	got, err := r.Converge(context.Background(), Trigger{Kind: TriggerDrift, Keys: keys, Why: why})
	if err != nil || len(runs) != 1 || !slices.Equal(runs[0].Keys, keys) || len(got.Changed) != n {
		t.Fatalf("storm: %d runs, err %v", len(runs), err)
	}
	if c := checked(); c != stormSample {
		t.Fatalf("storm: %d local checks, want the sample's %d", c, stormSample)
	}
	if runs[0].Why[keys[0]] != "write" || runs[0].Why[keys[n-1]] != "write" {
		t.Fatalf("storm: the hints' reasons lost: %q, %q", runs[0].Why[keys[0]], runs[0].Why[keys[n-1]])
	}

	// The run's own writes: every key stable. Checked here whole, no run.
	for _, f := range res {
		f.drifted, f.checks = false, 0
	}
	got, err = r.Converge(context.Background(), Trigger{Kind: TriggerDrift, Keys: keys, Why: why})
	if err != nil || len(runs) != 1 || len(got.Stable) != n {
		t.Fatalf("own writes: %d runs, %d stable, err %v", len(runs), len(got.Stable), err)
	}
	if c := checked(); c != n+stormSample {
		t.Fatalf("own writes: %d local checks, want %d (the sample, then all)", c, n+stormSample)
	}

	// A batch below the bound is checked whole: one key drifted.
	for _, f := range res {
		f.checks = 0
	}
	res[3].drifted = true
	if _, err := r.Converge(context.Background(), Trigger{Kind: TriggerDrift, Keys: keys[:minSampledBatch-1], Why: why}); err != nil ||
		len(runs) != 2 || !slices.Equal(runs[1].Keys, []string{keys[3]}) || checked() != minSampledBatch-1 {
		t.Fatalf("small batch: runs %+v, %d checks, err %v", runs[1:], checked(), err)
	}
}

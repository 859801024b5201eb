package converge

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/manifold-run/manifold/resources"
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
	for _, tr := range []Trigger{{Kind: TriggerStart}, {Kind: TriggerDrift, Keys: []string{"file#a"}}, {Kind: TriggerHealth, HealthOnly: true}} {
		if _, err := r.Converge(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	if a.checks != before || len(runs) != 5 || runs[2].Kind != TriggerStart || runs[4].Kind != TriggerHealth {
		t.Fatalf("pass-through: checks %d→%d, runs %+v", before, a.checks, runs)
	}
}

// BenchmarkCheckPassOverhead is the pass's own cost per resource around a
// check that does nothing (the loop, the result): what the interval pass
// adds to the checks themselves.
func BenchmarkCheckPassOverhead(b *testing.B) {
	checks := make([]LocalCheck, 20000)
	for i := range checks {
		checks[i] = LocalCheck{Key: "file#/x", Res: &fakeRes{}}
	}
	b.ReportAllocs()
	for b.Loop() {
		CheckPass(context.Background(), checks)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(checks)), "ns/resource")
}

package converge

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/safefs"
)

// reachProbe is a check that records the "readable by others" verdict of
// a directory as its ctx gives it.
type reachProbe struct {
	dir  string
	seen *[]bool
}

func (p reachProbe) Validate() error { return nil }
func (p reachProbe) CheckApply(ctx context.Context, _ *resources.Env, _ bool) (resources.Result, error) {
	*p.seen = append(*p.seen, safefs.ReachableByOthersContext(ctx, p.dir))
	if len(*p.seen) == 1 {
		// Closed after the first check of this pass: the pass judged it
		// already.
		if err := os.Chmod(p.dir, 0o700); err != nil {
			return resources.Result{}, err
		}
	}
	return resources.Result{}, nil
}

// TestPassJudgesReachOnce: a pass judges each directory's "readable by
// others" verdict once (the diffs of its drifted files); the next pass
// judges again.
func TestPassJudgesReachOnce(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(base, "conf")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var seen []bool
	checks := []LocalCheck{
		{Key: "a", Res: reachProbe{dir, &seen}, Env: &resources.Env{}},
		{Key: "b", Res: reachProbe{dir, &seen}, Env: &resources.Env{}},
	}
	pass := NewPass(checks)
	pass.Run(context.Background())
	if len(seen) != 2 || !seen[0] || !seen[1] {
		t.Fatalf("verdicts %v, want [true true]: one judgement per pass", seen)
	}
	pass.Run(context.Background())
	if len(seen) != 4 || seen[2] || seen[3] {
		t.Fatalf("verdicts %v, want the second pass to see the closed directory", seen)
	}
}

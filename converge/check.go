package converge

import (
	"context"
	"time"

	"github.com/manifold-run/manifold/resources"
)

// LocalCheck is one resource of a cached plan that an interval pass checks
// in this process.
type LocalCheck struct {
	// Key names the resource (its ref: what Trigger.Keys holds).
	Key string
	// Res is the resource, built once from the plan with this host's
	// facts. Nil means it cannot be checked here (its type runs on the
	// coordinator, like apply; it failed to render or build): every pass
	// counts it as drifted, so the run that follows handles it as a full
	// run would.
	Res resources.Resource
	// Env is what its check gets (only read: shared by passes).
	Env *resources.Env
}

// PassResult is what one interval pass found.
type PassResult struct {
	// Checked is the number of resources checked.
	Checked int
	// Drifted are the keys whose check found a change, failed, or that
	// cannot be checked here, in plan order; Why says which.
	Drifted []string
	Why     map[string]string
	// Stable are the keys found converged.
	Stable []string
	// Duration is the pass's wall time.
	Duration time.Duration
}

// CheckPass checks every resource of checks (CheckApply with apply false:
// nothing is changed) in order, in a tight loop: no span, no event, no
// report and no allocation per stable resource beyond what its check
// does. A check that ends with ctx's end counts as drifted.
func CheckPass(ctx context.Context, checks []LocalCheck) PassResult {
	start := time.Now()
	res := PassResult{Checked: len(checks), Stable: make([]string, 0, len(checks))}
	drift := func(key, why string) {
		if res.Why == nil {
			res.Why = map[string]string{}
		}
		res.Drifted = append(res.Drifted, key)
		res.Why[key] = why
	}
	for i := range checks {
		c := &checks[i]
		if c.Res == nil {
			drift(c.Key, "not checkable locally")
			continue
		}
		r, err := c.Res.CheckApply(ctx, c.Env, false)
		switch {
		case err != nil:
			drift(c.Key, "check failed: "+err.Error())
		case r.Changed:
			drift(c.Key, "drifted: "+r.Message)
		default:
			res.Stable = append(res.Stable, c.Key)
		}
	}
	res.Duration = time.Since(start)
	return res
}

// CheckFirst returns a Runner that answers a full interval run (trigger
// interval, no keys) with a local CheckPass over checks() and runs r only
// for the drifted resources (trigger interval, Keys: the drifted ones; r
// adds their refresh dependents as for a drift repair), or not at all when
// none drifted. Every other trigger goes to r unchanged. onPass, when set,
// is told of each pass before its run (ran false: no run followed).
//
// The pass needs no compile and no bus per resource: its cost is the
// checks' own. It does not run health checks (--health-interval does).
func CheckFirst(checks func() []LocalCheck, r Runner, onPass func(PassResult)) Runner {
	return RunnerFunc(func(ctx context.Context, t Trigger) (RunResult, error) {
		if t.Kind != TriggerInterval || len(t.Keys) > 0 || t.HealthOnly {
			return r.Converge(ctx, t)
		}
		pass := CheckPass(ctx, checks())
		if onPass != nil {
			onPass(pass)
		}
		if len(pass.Drifted) == 0 {
			return RunResult{Stable: pass.Stable}, nil
		}
		res, err := r.Converge(ctx, Trigger{Kind: TriggerInterval, Keys: pass.Drifted, Why: pass.Why})
		res.Stable = append(res.Stable, pass.Stable...)
		return res, err
	})
}

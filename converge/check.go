package converge

import (
	"cmp"
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/safefs"
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

// Pass is the checks of a cached plan made ready for passes: what a pass
// needs that does not change between passes is worked out once. The
// checks are visited grouped by the directory of their first watched
// path (plan order within a directory), under one parent-directory cache
// (safefs.Dirs) per pass: the files of one directory cost one walk from
// "/" per pass, not one each (a walk is a dozen system calls, half the
// cost of a file's check). Results stay in plan order.
type Pass struct {
	checks []LocalCheck
	order  []int          // indexes into checks, grouped by directory
	group  []int          // group[i]: the group number of order[i]
	index  map[string]int // key -> index into checks
}

// NewPass prepares checks for passes. The checks must not change while
// the Pass is used.
func NewPass(checks []LocalCheck) *Pass {
	p := &Pass{checks: checks, order: make([]int, len(checks)), group: make([]int, len(checks)), index: make(map[string]int, len(checks))}
	dirs := make([]string, len(checks))
	for i := range checks {
		p.order[i] = i
		p.index[checks[i].Key] = i
		if w, ok := checks[i].Res.(resources.Watcher); ok {
			for _, t := range w.WatchTargets() {
				if t.Path != "" {
					dirs[i] = filepath.Dir(filepath.Clean(t.Path))
					break
				}
			}
		}
	}
	slices.SortStableFunc(p.order, func(a, b int) int { return cmp.Compare(dirs[a], dirs[b]) })
	for i := 1; i < len(p.order); i++ {
		p.group[i] = p.group[i-1]
		if dirs[p.order[i]] != dirs[p.order[i-1]] {
			p.group[i]++
		}
	}
	return p
}

// Outcomes of one check in a pass.
const (
	outSkipped uint8 = iota // not asked for
	outStable
	outDrifted
)

// Run checks every resource (CheckApply with apply false: nothing is
// changed), in a tight loop: no span, no event, no report and no
// allocation per stable resource beyond what its check does. A check that
// ends with ctx's end counts as drifted.
func (p *Pass) Run(ctx context.Context) PassResult {
	return p.run(ctx, nil)
}

// RunKeys checks the resources of keys only (a drift batch: each key
// once, however often it is listed). A key the Pass does not hold counts
// as drifted (not checkable locally).
func (p *Pass) RunKeys(ctx context.Context, keys []string) PassResult {
	want := make([]bool, len(p.checks))
	var unknown []string
	for _, k := range keys {
		if i, ok := p.index[k]; ok {
			want[i] = true
		} else if !slices.Contains(unknown, k) {
			unknown = append(unknown, k)
		}
	}
	res := p.run(ctx, want)
	for _, k := range unknown {
		res.drift(k, "not checkable locally")
		res.Checked++
	}
	return res
}

func (r *PassResult) drift(key, why string) {
	if r.Why == nil {
		r.Why = map[string]string{}
	}
	r.Drifted = append(r.Drifted, key)
	r.Why[key] = why
}

// run checks the resources want selects (all when nil). A pass of at
// least minSplitPass checks is split at directory boundaries into up to
// GOMAXPROCS (at most maxPassParts) parts checked side by side, each under
// its own directory cache: a storm's check before its repair run and an
// interval pass take a core each instead of one (the CPU is the same).
func (p *Pass) run(ctx context.Context, want []bool) PassResult {
	start := time.Now()
	out := make([]uint8, len(p.checks))
	// A pass changes nothing: each directory's "readable by others"
	// verdict (the diffs of drifted files) is judged once per pass.
	ctx = safefs.WithReach(ctx, safefs.NewReach())
	parts := p.split(want)
	whys := make([]map[int]string, len(parts))
	if len(parts) == 1 {
		whys[0] = p.runPart(ctx, want, out, 0, len(p.order))
	} else {
		var wg sync.WaitGroup
		for k, part := range parts {
			wg.Go(func() { whys[k] = p.runPart(ctx, want, out, part[0], part[1]) })
		}
		wg.Wait()
	}
	stable := 0
	for _, o := range out {
		if o == outStable {
			stable++
		}
	}
	res := PassResult{Stable: make([]string, 0, stable)}
	for i, o := range out {
		switch o {
		case outStable:
			res.Stable = append(res.Stable, p.checks[i].Key)
		case outDrifted:
			for _, why := range whys {
				if w, ok := why[i]; ok {
					res.drift(p.checks[i].Key, w)
					break
				}
			}
		}
	}
	res.Checked = len(res.Stable) + len(res.Drifted)
	res.Duration = time.Since(start)
	return res
}

// Splitting a pass (run).
const (
	minSplitPass = 1024
	maxPassParts = 4
)

// split returns the ranges [from, to) of p.order checked side by side:
// one when the pass is small or one core is all there is, else parts of
// about as many wanted checks each, cut where the directory changes.
func (p *Pass) split(want []bool) [][2]int {
	n := len(p.order)
	if want != nil {
		n = 0
		for _, w := range want {
			if w {
				n++
			}
		}
	}
	return p.splitInto(want, min(runtime.GOMAXPROCS(0), maxPassParts), n)
}

// splitInto cuts the pass into at most parts parts; n is the number of
// checks want selects.
func (p *Pass) splitInto(want []bool, parts, n int) [][2]int {
	if n < minSplitPass || parts < 2 {
		return [][2]int{{0, len(p.order)}}
	}
	per := (n + parts - 1) / parts
	var out [][2]int
	from, count := 0, 0
	for j, i := range p.order {
		if want == nil || want[i] {
			count++
		}
		if count >= per && j+1 < len(p.order) && p.group[j+1] != p.group[j] {
			out = append(out, [2]int{from, j + 1})
			from, count = j+1, 0
		}
	}
	return append(out, [2]int{from, len(p.order)})
}

// runPart checks the wanted resources of p.order[from:to] under a
// directory cache of its own, writing each one's outcome into out (its
// own indexes only) and returning why each drifted one did.
func (p *Pass) runPart(ctx context.Context, want []bool, out []uint8, from, to int) map[int]string {
	why := make(map[int]string)
	dirs := safefs.NewDirs()
	cctx := safefs.WithDirs(ctx, dirs)
	for j := from; j < to; j++ {
		i := p.order[j]
		if want != nil && !want[i] {
			continue
		}
		c := &p.checks[i]
		if c.Res == nil {
			out[i], why[i] = outDrifted, "not checkable locally"
			continue
		}
		if j > from && p.group[j] != p.group[j-1] && dirs.Len() >= safefs.MaxCachedDirs/2 {
			// A new directory and a full cache: start afresh rather than
			// walk from "/" for every file past the cache's bound.
			dirs.Close()
			dirs = safefs.NewDirs()
			cctx = safefs.WithDirs(ctx, dirs)
		}
		r, err := c.Res.CheckApply(cctx, c.Env, false)
		switch {
		case err != nil:
			out[i], why[i] = outDrifted, "check failed: "+err.Error()
		case r.Changed:
			out[i], why[i] = outDrifted, "drifted: "+r.Message
		default:
			out[i] = outStable
		}
	}
	dirs.Close()
	return why
}

// A storm's drift batch (CheckFirst): from minSampledBatch keys, the first
// stormSample are checked here; when at least stormSampleDrifted of them
// drifted, the batch is a storm of real edits and the rest go to the run
// without a local check: every one of them would be found drifted and
// checked again by the run, and the local checks of 10,000 edits took
// 0.1 s of wall before the run could start.
const (
	minSampledBatch    = 1024
	stormSample        = 64
	stormSampleDrifted = 60
)

// CheckPass checks every resource of checks once (NewPass(checks).Run):
// callers that pass over the same checks again keep the Pass.
func CheckPass(ctx context.Context, checks []LocalCheck) PassResult {
	return NewPass(checks).Run(ctx)
}

// CheckFirst returns a Runner that checks locally before it asks r for a
// run:
//
//   - a full interval run (trigger interval, no keys) becomes a Pass over
//     checks() and a run of the drifted resources only (trigger interval,
//     Keys: the drifted ones; r adds their refresh dependents as for a
//     drift repair), or none when none drifted; onPass, when set, is told
//     of each such pass before its run;
//   - a drift repair (trigger drift with keys) checks the hinted keys and
//     runs only those that drifted (their hints' Why kept), or none: an
//     event is a hint, and the hints of a run's own writes (read after the
//     run, in the next batch) cost a local check each, not a run. A storm
//     of N edits is repaired by runs holding N resources in all, not N
//     plus the re-checks of what the previous runs wrote. A batch of
//     minSampledBatch keys or more whose first stormSample are nearly all
//     drifted sends the rest to the run unchecked here.
//
// Every other trigger goes to r unchanged. The Pass is built once per
// slice checks() returns (the same slice again reuses it). The passes
// need no compile and no bus per resource: their cost is the checks' own.
// They do not run health checks (--health-interval does).
func CheckFirst(checks func() []LocalCheck, r Runner, onPass func(PassResult)) Runner {
	var (
		mu   sync.Mutex
		prev []LocalCheck
		pass *Pass
	)
	prepared := func() *Pass {
		cs := checks()
		mu.Lock()
		defer mu.Unlock()
		if pass == nil || len(cs) != len(prev) || (len(cs) > 0 && &cs[0] != &prev[0]) {
			prev, pass = cs, NewPass(cs)
		}
		return pass
	}
	return RunnerFunc(func(ctx context.Context, t Trigger) (RunResult, error) {
		switch {
		case t.HealthOnly:
			return r.Converge(ctx, t)
		case t.Kind == TriggerInterval && len(t.Keys) == 0:
			p := prepared().Run(ctx)
			if onPass != nil {
				onPass(p)
			}
			if len(p.Drifted) == 0 {
				return RunResult{Stable: p.Stable}, nil
			}
			res, err := r.Converge(ctx, Trigger{Kind: TriggerInterval, Keys: p.Drifted, Why: p.Why})
			res.Stable = append(res.Stable, p.Stable...)
			return res, err
		case t.Kind == TriggerDrift && len(t.Keys) > 0:
			pass := prepared()
			var (
				p       PassResult
				rest    []string
				sampled bool
			)
			if len(t.Keys) >= minSampledBatch {
				// A storm's batch: when nearly all of a sample drifted,
				// the rest go to the run unchecked here (its own check
				// decides); a batch of a run's own writes is checked here
				// whole, as any (the sample again with it).
				if p = pass.RunKeys(ctx, t.Keys[:stormSample]); len(p.Drifted) >= stormSampleDrifted {
					rest, sampled = t.Keys[stormSample:], true
				}
			}
			if !sampled {
				p = pass.RunKeys(ctx, t.Keys)
			}
			if len(p.Drifted)+len(rest) == 0 {
				return RunResult{Stable: p.Stable}, nil
			}
			why := make(map[string]string, len(p.Drifted)+len(rest))
			for _, k := range p.Drifted {
				why[k] = cmp.Or(t.Why[k], p.Why[k])
			}
			for _, k := range rest {
				why[k] = t.Why[k]
			}
			res, err := r.Converge(ctx, Trigger{Kind: TriggerDrift, Keys: append(p.Drifted, rest...), Why: why})
			res.Stable = append(res.Stable, p.Stable...)
			return res, err
		default:
			return r.Converge(ctx, t)
		}
	})
}

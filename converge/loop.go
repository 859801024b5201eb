package converge

import (
	"context"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// TriggerKind says why a convergence run happens (the run's `trigger`).
type TriggerKind string

// The triggers of convergence runs.
const (
	// TriggerStart is the first full run of a loop (a process started, or
	// a worker took an assignment back up).
	TriggerStart TriggerKind = "start"
	// TriggerAssign is the first run of a new assignment.
	TriggerAssign TriggerKind = "assign"
	// TriggerChange is the first run of a new version of an assignment.
	TriggerChange TriggerKind = "change"
	// TriggerInterval is the periodic full check.
	TriggerInterval TriggerKind = "interval"
	// TriggerDrift is a repair of the resources an event hinted.
	TriggerDrift TriggerKind = "drift"
	// TriggerHealth is a remediation run after a CRITICAL health check.
	TriggerHealth TriggerKind = "health"
)

// Trigger is what a convergence run is asked to do.
type Trigger struct {
	Kind TriggerKind
	// Keys are the resources to check (drift); empty means all of them.
	Keys []string
	// Why is what hinted each key (drift), or the reason of the run.
	Why map[string]string
	// HealthOnly runs the health checks only (the health timer).
	HealthOnly bool
}

// RunResult is what a convergence run found, per resource key.
type RunResult struct {
	// Changed resources were repaired (in noop: would have been).
	Changed []string
	// Failed resources did not converge.
	Failed []string
	// Stable resources were already converged.
	Stable []string
	// Critical is true when a health check answered CRITICAL.
	Critical bool
}

// Runner runs one convergence (an ordinary run, in manifold).
type Runner interface {
	Converge(ctx context.Context, t Trigger) (RunResult, error)
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, t Trigger) (RunResult, error)

// Converge calls f.
func (f RunnerFunc) Converge(ctx context.Context, t Trigger) (RunResult, error) { return f(ctx, t) }

// State is a loop's convergence state, as `manifold workers` shows it.
type State string

// The convergence states.
const (
	StateConverged State = "converged"
	StateRepairing State = "repairing"
	StateDrifted   State = "drifted" // noop: drift seen, not repaired
	StateFlapping  State = "flapping"
	StateFailed    State = "failed"
)

// Status is a loop's state and since when.
type Status struct {
	State State
	Since time.Time
	// Flapping lists the resources being backed off.
	Flapping []string
	// Polling is set when events cannot be trusted (the inotify limit):
	// only interval checks see drift.
	Polling bool
}

// LoopConfig configures Loop.
type LoopConfig struct {
	// Interval is the period of full checks. Defaults to 30m.
	Interval time.Duration
	// Jitter spreads interval checks by up to this fraction of Interval,
	// so a fleet does not check in step. Defaults to 0.1.
	Jitter float64
	// HealthInterval is the period of health-check-only runs; zero means
	// none.
	HealthInterval time.Duration
	// Noop detects drift only: a loop in noop reports `drifted`.
	Noop bool
	// SkipStart leaves out the first full run (the caller has just run
	// it).
	SkipStart bool
	Coalesce  CoalesceConfig
	Damper    DamperConfig
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// OnStatus, when set, is told every change of status.
	OnStatus func(Status)
	// Now is the clock (tests). Defaults to time.Now.
	Now func() time.Time
}

func (c LoopConfig) withDefaults() LoopConfig {
	if c.Interval <= 0 {
		c.Interval = 30 * time.Minute
	}
	if c.Jitter <= 0 {
		c.Jitter = 0.1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Loop keeps one set of resources converged: a full run at start, a
// repair of the hinted resources for each batch of hints (those a fight
// backed off later, at the damper's pace), a full run every Interval (with
// jitter) and after an overflow, health checks every HealthInterval and a
// full remediation run when one is CRITICAL. It returns when ctx ends,
// after the run in progress has finished (runs get a context that is not
// cancelled with ctx: a repair is never cut in half), or when hints is
// closed.
func Loop(ctx context.Context, cfg LoopConfig, r Runner, hints <-chan Hint) error {
	cfg = cfg.withDefaults()
	l := &loop{cfg: cfg, r: r, damper: NewDamper(cfg.Damper), deferred: map[string]string{}}
	batches := make(chan Batch)
	cctx, stopCoalesce := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		Coalesce(cctx, cfg.Coalesce, hints, batches)
	}()
	defer func() {
		stopCoalesce()
		for range batches { // let Coalesce end
		}
		wg.Wait()
	}()

	if !cfg.SkipStart {
		l.run(ctx, Trigger{Kind: TriggerStart})
	} else {
		l.setState(StateConverged)
	}
	interval := time.NewTimer(l.nextInterval())
	defer interval.Stop()
	var health <-chan time.Time
	if cfg.HealthInterval > 0 {
		t := time.NewTicker(cfg.HealthInterval)
		defer t.Stop()
		health = t.C
	}
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case b, ok := <-batches:
			if !ok {
				return nil
			}
			if b.All {
				l.run(ctx, Trigger{Kind: TriggerDrift, Why: map[string]string{"": b.Why[""]}})
				continue
			}
			l.repair(ctx, b.Keys, b.Why, retry)
		case <-retry.C:
			keys := slices.Sorted(maps.Keys(l.deferred))
			why := l.deferred
			l.deferred = map[string]string{}
			l.repair(ctx, keys, why, retry)
		case <-interval.C:
			l.run(ctx, Trigger{Kind: TriggerInterval})
			interval.Reset(l.nextInterval())
		case <-health:
			res := l.run(ctx, Trigger{Kind: TriggerHealth, HealthOnly: true})
			if res.Critical {
				l.run(ctx, Trigger{Kind: TriggerHealth, Why: map[string]string{"": "a health check is CRITICAL"}})
			}
		}
	}
}

type loop struct {
	cfg      LoopConfig
	r        Runner
	damper   *Damper
	deferred map[string]string // keys backed off, with what hinted them
	status   Status
}

// repair runs the hinted keys the damper allows now and defers the others
// to when it will.
func (l *loop) repair(ctx context.Context, keys []string, why map[string]string, retry *time.Timer) {
	now := l.cfg.Now()
	var allowed []string
	var earliest time.Time
	for _, k := range keys {
		ok, at, _ := l.damper.Allow(k, now)
		if ok {
			allowed = append(allowed, k)
			continue
		}
		l.deferred[k] = why[k]
		if earliest.IsZero() || at.Before(earliest) {
			earliest = at
		}
	}
	if !earliest.IsZero() {
		retry.Reset(earliest.Sub(now))
	}
	if len(allowed) == 0 {
		l.setState(l.status.State) // flapping list may have changed
		return
	}
	w := map[string]string{}
	for _, k := range allowed {
		w[k] = why[k]
	}
	l.run(ctx, Trigger{Kind: TriggerDrift, Keys: allowed, Why: w})
}

// run runs one convergence to its end, whatever ctx does, and folds its
// result into the damper and the status.
func (l *loop) run(ctx context.Context, t Trigger) RunResult {
	if !t.HealthOnly {
		l.setState(StateRepairing)
	}
	res, err := l.r.Converge(context.WithoutCancel(ctx), t)
	now := l.cfg.Now()
	if err != nil {
		l.cfg.Logger.Error("convergence run failed", "trigger", string(t.Kind), "error", err)
		l.setState(StateFailed)
		return res
	}
	if t.HealthOnly {
		return res
	}
	if !l.cfg.Noop {
		for _, k := range res.Changed {
			l.damper.Repaired(k, now)
		}
	}
	for _, k := range res.Stable {
		l.damper.Stable(k, now)
	}
	switch {
	case len(res.Failed) > 0:
		l.setState(StateFailed)
	case l.cfg.Noop && len(res.Changed) > 0:
		l.setState(StateDrifted)
	default:
		l.setState(StateConverged)
	}
	return res
}

// setState records the state (flapping wins over converged while a
// resource is backed off) and tells OnStatus when anything changed.
func (l *loop) setState(s State) {
	now := l.cfg.Now()
	flapping := l.damper.Flapping(now)
	slices.Sort(flapping)
	if len(flapping) > 0 && (s == StateConverged || s == StateRepairing) {
		s = StateFlapping
	}
	if s == l.status.State && slices.Equal(flapping, l.status.Flapping) {
		return
	}
	if s != l.status.State {
		l.status.Since = now
	}
	l.status.State, l.status.Flapping = s, flapping
	if l.cfg.OnStatus != nil {
		l.cfg.OnStatus(l.status)
	}
}

// nextInterval is Interval less up to Jitter of it.
func (l *loop) nextInterval() time.Duration {
	j := time.Duration(rand.Float64() * l.cfg.Jitter * float64(l.cfg.Interval))
	return l.cfg.Interval - j
}

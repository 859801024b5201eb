package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/converge"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/template"
)

// DefaultConvergeTimeout is the default of Config.ConvergeTimeout.
const DefaultConvergeTimeout = time.Hour

// AssignmentStatus is a worker's convergence state of one assignment, as
// its entry in the workers bucket shows it (`manifold workers`).
type AssignmentStatus struct {
	Version uint64 `json:"version"`
	// State is converged, repairing, drifted (noop), flapping or failed.
	State converge.State `json:"state"`
	Since time.Time      `json:"since"`
	// Flapping lists the resources another writer keeps changing (their
	// repairs are backed off).
	Flapping []string `json:"flapping,omitempty"`
	// LastRun is the last convergence run's ID, LastTrigger its trigger.
	LastRun     string `json:"last_run,omitempty"`
	LastTrigger string `json:"last_trigger,omitempty"`
	// Polling is set when the resources' paths are not (all) watched:
	// only interval checks see drift there.
	Polling bool `json:"polling,omitempty"`
	// LastChecked is when every resource was last checked and found
	// converged or repaired: by a full run, or by an interval check of the
	// cached plan that found nothing drifted (no run then: docs/offline.md).
	LastChecked time.Time `json:"last_checked,omitzero"`
	// Offline is set while the worker converges the assignment from its
	// cached plan because the bus or the coordinators are out of reach;
	// Spooled counts its offline runs not yet reported.
	Offline bool `json:"offline,omitempty"`
	Spooled int  `json:"spooled,omitempty"`
	// Cached says the worker holds a valid plan of this version (interval
	// checks run locally; the assignment is converged offline too).
	Cached bool `json:"cached,omitempty"`
}

// assigner keeps a worker's assignments converged: it watches the
// assignments bucket and runs one converge.Loop per assignment of the
// worker's pools (whose where holds on its facts). Each convergence is a
// run the worker asks the coordinators for (manifold.converge.<worker>).
type assigner struct {
	w   *Worker
	log *slog.Logger
	m   *assignMetrics

	// plans is the directory of cached plans ("": memory only), planMax
	// their bound in bytes; spool holds the offline runs to report.
	plans   string
	planMax int
	spool   *spool

	mu     sync.Mutex
	loops  map[string]*assignLoop
	status map[string]AssignmentStatus
	wg     sync.WaitGroup

	// synced is closed once the stored assignments have all been read
	// (AssignmentsSynced).
	synced     chan struct{}
	syncedOnce sync.Once
}

// AssignmentsSynced is closed once the worker has read the assignments
// stored when it started: an assignment made after that is taken with
// trigger assign, one stored before with trigger start. Start returns
// before (the listing is one more round trip a worker need not wait for);
// closed at once when the worker leaves assignments alone.
func (w *Worker) AssignmentsSynced() <-chan struct{} {
	if w.assign == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return w.assign.synced
}

// assignLoop is the loop of one version of one assignment.
type assignLoop struct {
	a      bus.Assignment
	first  converge.TriggerKind
	cancel context.CancelFunc
	done   chan struct{}
	pw     *converge.PathWatcher // nil: not watched
	uw     *converge.UnitWatcher // services' units (systemctl poll); nil: not watched
	kw     *converge.KVWatcher   // kv:// documents' entries; nil: not watched

	mu      sync.Mutex
	running map[string]bool      // refs whose task runs here: their events are its own writes
	seen    map[string]time.Time // ref → first hint not yet repaired
	// collecting gathers the tasks of runs in progress by run ID; plan is
	// the cached plan (plan.go).
	collecting map[string]*collecting
	plan       *plan
}

func newAssigner(w *Worker) (*assigner, error) {
	m, err := newAssignMetrics(w.cfg.MeterProvider, w.cfg.Name)
	if err != nil {
		return nil, err
	}
	log := w.log.With("component", "assignments")
	s := &assigner{w: w, log: log, m: m, planMax: w.cfg.PlanCacheMaxBytes,
		loops: map[string]*assignLoop{}, status: map[string]AssignmentStatus{}, synced: make(chan struct{})}
	spoolDir := ""
	if w.cfg.StateDir != "" {
		s.plans, spoolDir = filepath.Join(w.cfg.StateDir, "plans"), filepath.Join(w.cfg.StateDir, "offline")
	}
	if s.spool, err = openSpool(spoolDir, w.cfg.SpoolMax, log); err != nil {
		return nil, err
	}
	return s, nil
}

// run watches the assignments until ctx ends, then stops every loop
// (each after its run in progress, abandoned if the worker stops).
func (s *assigner) run(ctx context.Context) {
	defer s.stopAll()
	s.wg.Go(func() { s.deliver(ctx) })
	synced := false
	for ctx.Err() == nil {
		updates, err := s.w.bus.WatchAssignments(ctx)
		if err != nil {
			s.log.Warn("assignments not watched; retrying", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			continue
		}
		seen := map[string]bool{}
		for u := range updates {
			switch {
			case u.Name == "" && u.Initial: // the stored ones are all in
				s.mu.Lock()
				var stopped []chan struct{}
				for name := range s.loops {
					if !seen[name] {
						stopped = append(stopped, s.stopLocked(name))
					}
				}
				s.mu.Unlock()
				for _, done := range stopped {
					<-done
				}
				synced = true
				s.syncedOnce.Do(func() { close(s.synced) })
				s.publish(ctx)
			case u.Err != nil:
				s.log.Warn("assignment ignored: unreadable", "assignment", u.Name, "error", u.Err)
			case u.Assignment == nil:
				s.mu.Lock()
				done := s.stopLocked(u.Name)
				s.mu.Unlock()
				<-done
				s.dropPlan(u.Name)
				s.log.Info("unassigned: no longer kept converged", "assignment", u.Name)
				s.publish(ctx)
			default:
				seen[u.Name] = true
				s.take(ctx, *u.Assignment, synced)
			}
		}
	}
}

// take starts, replaces or stops the loop of an assignment's version.
func (s *assigner) take(ctx context.Context, a bus.Assignment, synced bool) {
	mine, why := s.mine(a)
	s.mu.Lock()
	old := s.loops[a.Name]
	if !mine {
		done := s.stopLocked(a.Name)
		s.mu.Unlock()
		<-done
		s.dropPlan(a.Name)
		if old != nil {
			s.log.Info("assignment no longer for this worker", "assignment", a.Name, "why", why)
			s.publish(ctx)
		}
		return
	}
	if old != nil && old.a.Version == a.Version {
		s.mu.Unlock()
		return
	}
	first := converge.TriggerStart
	switch {
	case old != nil:
		first = converge.TriggerChange
	case synced:
		first = converge.TriggerAssign
	}
	// The old version's run in progress ends first (never two runs of
	// one assignment at once).
	done := s.stopLocked(a.Name)
	s.mu.Unlock()
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startLocked(ctx, a, first)
}

// mine reports whether a is for this worker: one of its pools, and its
// where true over the worker's facts.
func (s *assigner) mine(a bus.Assignment) (bool, string) {
	if !slices.Contains(s.w.cfg.Pools, a.Pool) {
		return false, "pool " + a.Pool + " is not one of this worker's"
	}
	if a.Where == "" {
		return true, ""
	}
	ok, _, err := control(a.Where, "", template.Scope{Facts: s.w.facts(), Environ: environ()})
	if err != nil {
		s.log.Warn("assignment not taken: its where does not evaluate over this worker's facts", "assignment", a.Name, "where", a.Where, "error", err)
		return false, "where: " + err.Error()
	}
	if !ok {
		return false, "where is false over this worker's facts"
	}
	return true, ""
}

// startLocked starts the loop of a; s.mu is held.
func (s *assigner) startLocked(ctx context.Context, a bus.Assignment, first converge.TriggerKind) {
	lctx, cancel := context.WithCancel(ctx)
	l := &assignLoop{a: a, first: first, cancel: cancel, done: make(chan struct{}),
		running: map[string]bool{}, seen: map[string]time.Time{}, collecting: map[string]*collecting{},
		plan: s.loadPlan(a)}
	raw := make(chan converge.Hint, 4096)
	polling := false
	if a.Watch {
		pw, err := converge.NewPathWatcher(raw)
		if err != nil {
			s.log.Warn("assignment's paths not watched: drift is seen by interval checks only", "assignment", a.Name, "error", err)
			polling = true
		} else {
			l.pw = pw
		}
		l.uw = converge.NewUnitWatcher(converge.UnitWatcherConfig{Logger: s.log.With("assignment", a.Name)}, raw)
		l.uw.Start(lctx)
		l.kw = converge.NewKVWatcher(s.w.bus, raw)
	}
	s.loops[a.Name] = l
	s.status[a.Name] = AssignmentStatus{Version: a.Version, State: converge.StateRepairing, Since: time.Now().UTC(), Polling: polling,
		Cached: l.plan != nil, Spooled: s.spool.count(a.Name)}
	s.log.Info("keeping an assignment converged", "assignment", a.Name, "version", a.Version, "trigger", string(first), "watch", a.Watch, "noop", a.Noop)
	hints := make(chan converge.Hint, 4096)
	s.wg.Go(func() { // hints: the run's own writes dropped, first sightings kept
		defer close(hints)
		for {
			select {
			case <-lctx.Done():
				return
			case h := <-raw:
				if !h.All && !l.admit(h.Key) {
					continue
				}
				s.m.drift(lctx, h.Key)
				select {
				case hints <- h:
				case <-lctx.Done():
					return
				}
			}
		}
	})
	cfg := converge.LoopConfig{
		Interval: time.Duration(a.IntervalMS) * time.Millisecond, HealthInterval: time.Duration(a.HealthIntervalMS) * time.Millisecond,
		Noop: a.Noop, Logger: s.log.With("assignment", a.Name, "version", a.Version),
		OnStatus: func(st converge.Status) { s.setStatus(lctx, l, st) },
	}
	runner := &assignRunner{s: s, l: l, stop: lctx}
	s.wg.Go(func() {
		defer close(l.done)
		if err := converge.Loop(lctx, cfg, runner, hints); err != nil {
			s.log.Error("assignment loop ended", "assignment", a.Name, "error", err)
		}
		if l.pw != nil {
			_ = l.pw.Close()
		}
		if l.uw != nil {
			l.uw.Stop()
			l.kw.Close()
		}
	})
}

// stopLocked stops the loop of name (s.mu is held) and forgets its state.
// The returned channel is closed once the loop's run in progress has
// ended (or been abandoned): wait for it without holding s.mu.
func (s *assigner) stopLocked(name string) chan struct{} {
	l := s.loops[name]
	if l == nil {
		closed := make(chan struct{})
		close(closed)
		return closed
	}
	delete(s.loops, name)
	delete(s.status, name)
	l.cancel()
	return l.done
}

func (s *assigner) stopAll() {
	s.mu.Lock()
	for name := range s.loops {
		s.stopLocked(name)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// setStatus records a loop's status (if the loop is still current) and
// publishes it at once.
func (s *assigner) setStatus(ctx context.Context, l *assignLoop, st converge.Status) {
	s.mu.Lock()
	if s.loops[l.a.Name] != l {
		s.mu.Unlock()
		return
	}
	cur := s.status[l.a.Name]
	for _, k := range st.Flapping {
		if !slices.Contains(cur.Flapping, k) {
			s.m.flapping(ctx, k)
		}
	}
	cur.State, cur.Since, cur.Flapping = st.State, st.Since.UTC(), st.Flapping
	cur.Polling = cur.Polling || st.Polling
	s.status[l.a.Name] = cur
	s.mu.Unlock()
	s.publish(ctx)
}

// snapshot returns the status of every assignment kept here.
func (s *assigner) snapshot() map[string]AssignmentStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.status) == 0 {
		return nil
	}
	return maps.Clone(s.status)
}

// publish writes the worker's entry now, so a change of state is seen at
// once rather than at the next heartbeat. Not while the connection is
// down: the write would only wait for its timeout, holding up the loop
// that converges offline meanwhile; the heartbeat after the reconnection
// writes the state then.
func (s *assigner) publish(ctx context.Context) {
	if s.unreachable() != "" {
		return
	}
	if err := s.w.register(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("convergence state not published", "error", err)
	}
}

// loop returns the loop of an assignment run's task, when the task is
// pinned to this worker.
func (s *assigner) loop(task bus.Task) *assignLoop {
	if task.Assignment == "" || task.Pool != bus.PinnedPool(s.w.cfg.Name) || task.HealthCheckOnly {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loops[task.Assignment]
}

// executing marks ref as being executed: its events meanwhile are the
// task's own writes. The returned func ends that and watches the built
// resource's paths (resources.Watcher), keyed by ref. Events of the
// task's writes read after it ended cost a repair run that finds the
// resource stable (the damper counts only changes); no time window is
// ignored, so another writer right after a repair is always seen.
func (s *assigner) executing(task bus.Task) func(resources.Resource) {
	l := s.loop(task)
	if l == nil {
		return func(resources.Resource) {}
	}
	ref := task.Resource.Ref()
	l.mu.Lock()
	l.running[ref] = true
	l.mu.Unlock()
	return func(res resources.Resource) {
		if wt, ok := res.(resources.Watcher); ok && (l.pw != nil || l.uw != nil) {
			if targets := wt.WatchTargets(); len(targets) > 0 {
				if l.pw != nil {
					if err := l.pw.Set(ref, targets); err != nil {
						s.log.Warn("resource not watched: drift is seen by interval checks", "assignment", l.a.Name, "resource", ref, "error", err)
					}
				}
				if l.uw != nil {
					l.uw.Set(ref, targets)
					if err := l.kw.Set(ref, targets); err != nil {
						s.log.Warn("document entry not watched: drift is seen by interval checks", "assignment", l.a.Name, "resource", ref, "error", err)
					}
				}
			}
		}
		l.mu.Lock()
		delete(l.running, ref)
		l.mu.Unlock()
	}
}

// admit notes when drift of ref was first seen (not while the resource's
// own task runs: that is its own write, for the repair-time metric) and
// admits every hint.
func (l *assignLoop) admit(ref string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	// An event read while the resource's task runs may be the task's own
	// write or another writer's: it is admitted either way (an own write
	// costs a check that finds the resource stable; dropping it could
	// lose a hand edit until the next full check).
	if _, ok := l.seen[ref]; !ok && !l.running[ref] {
		l.seen[ref] = time.Now()
	}
	return true
}

// repaired forgets when drift of refs was first seen, if before the run
// that repaired them started (a later sighting is for the next run: the
// run's own writes read late, or new drift), and returns how long ago
// that was.
func (l *assignLoop) repaired(refs []string, started time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, r := range refs {
		if at, ok := l.seen[r]; ok && at.Before(started) {
			out = append(out, time.Since(at))
			delete(l.seen, r)
		}
	}
	return out
}

// assignRunner runs one convergence of an assignment: a request to the
// coordinators, answered when the run has ended.
type assignRunner struct {
	s       *assigner
	l       *assignLoop
	stop    context.Context // the loop's: a stopping worker abandons the wait
	started bool
	// passPlan is the plan pass was built from (hinted checks).
	passPlan *plan
	pass     *converge.Pass
	tasks    map[string]bus.Task // ref -> task of passPlan
}

// prepare builds the converge.Pass of p once: its built resources, less
// those whose control guard was false when built (nothing to check; a
// hint of one goes to the run, which evaluates the guard again). One that
// could not be built has no resource: every pass finds it drifted.
func (r *assignRunner) prepare(ctx context.Context, p *plan) {
	if r.passPlan == p {
		return
	}
	items := r.s.build(ctx, p)
	checks := make([]converge.LocalCheck, 0, len(items))
	r.tasks = make(map[string]bus.Task, len(items))
	for _, it := range items {
		if it.skip {
			continue
		}
		c := converge.LocalCheck{Key: it.ref, Env: it.env}
		if it.err == nil {
			c.Res = it.res
		}
		checks = append(checks, c)
		r.tasks[it.ref] = it.task
	}
	r.passPlan, r.pass = p, converge.NewPass(checks)
}

// intervalCheck checks every resource of the cached plan p here (a
// converge.Pass: grouped by directory, one walk from "/" per directory)
// and returns the refs that drifted — a check that reports a change or
// fails, a resource that could not be built, or a refresh owed — and the
// stable ones. Health checks are not run (the health interval runs them).
func (r *assignRunner) intervalCheck(ctx context.Context, p *plan) (drifted, stable []string) {
	r.prepare(ctx, p)
	res := r.pass.Run(ctx)
	drifted = res.Drifted
	for _, ref := range res.Stable {
		if _, owed := r.s.w.debts.owes(r.tasks[ref]); owed {
			drifted = append(drifted, ref)
			continue
		}
		stable = append(stable, ref)
	}
	return drifted, stable
}

// hinted checks the hinted refs of a drift batch locally from the cached
// plan p (a converge.Pass built once per plan) and returns those to
// repair: drifted, failing their check, not checkable here (not built, a
// control guard: the run decides) or owing a refresh. The others are
// stable: the events of a repair's own writes, read after it, cost a local
// check each, not a run.
func (r *assignRunner) hinted(ctx context.Context, p *plan, refs []string) (drifted []string, why map[string]string, stable []string) {
	r.prepare(ctx, p)
	var check []string
	why = map[string]string{}
	for _, ref := range refs {
		if t, ok := r.tasks[ref]; ok {
			if _, owed := r.s.w.debts.owes(t); owed {
				if _, dup := why[ref]; !dup {
					drifted = append(drifted, ref)
					why[ref] = "a refresh is owed"
				}
				continue
			}
		}
		check = append(check, ref)
	}
	res := r.pass.RunKeys(ctx, check)
	for _, ref := range res.Drifted {
		if _, dup := why[ref]; !dup {
			drifted = append(drifted, ref)
			why[ref] = res.Why[ref]
		}
	}
	return drifted, why, res.Stable
}

// Converge implements converge.Runner. An interval check of an
// assignment whose plan is cached checks every resource here first and
// asks for a repair run of the drifted ones only (none: no run); so does
// a drift repair for its hinted resources (hinted). While the
// bus or every coordinator is out of reach, the run is carried out here
// from the cached plan and spooled (offline.go).
func (r *assignRunner) Converge(ctx context.Context, t converge.Trigger) (converge.RunResult, error) {
	s := r.s
	kind := t.Kind
	if !r.started && kind == converge.TriggerStart {
		kind = r.l.first
	}
	r.started = true
	if kind == converge.TriggerInterval && len(t.Keys) == 0 && !t.HealthOnly {
		if p := s.currentPlan(r.l); p != nil {
			start := time.Now()
			drifted, stable := r.intervalCheck(ctx, p)
			s.log.Debug("interval check of the cached plan", "assignment", r.l.a.Name, "resources", len(p.Tasks),
				"drifted", len(drifted), "duration", time.Since(start))
			if len(drifted) == 0 {
				s.checked(r.l)
				return converge.RunResult{Stable: stable}, nil
			}
			why := make(map[string]string, len(drifted))
			for _, k := range drifted {
				why[k] = "interval check: drifted"
			}
			t.Keys, t.Why = drifted, why
		}
	}
	if kind == converge.TriggerDrift && len(t.Keys) > 0 && !t.HealthOnly {
		if p := s.currentPlan(r.l); p != nil {
			drifted, checkWhy, stable := r.hinted(ctx, p, t.Keys)
			r.l.repaired(stable, time.Now()) // drift hinted but not there
			if len(drifted) == 0 {
				return converge.RunResult{Stable: stable}, nil
			}
			why := make(map[string]string, len(drifted))
			for _, k := range drifted {
				why[k] = cmp.Or(t.Why[k], checkWhy[k])
			}
			t.Keys, t.Why = drifted, why
		}
	}
	if why := s.unreachable(); why != "" {
		return r.offline(ctx, kind, t, why)
	}
	res, err := r.online(ctx, kind, t)
	if errors.Is(err, errUnreachable) {
		return r.offline(ctx, kind, t, err.Error())
	}
	return res, err
}

// offline converges from the cached plan (see assigner.offline).
func (r *assignRunner) offline(ctx context.Context, kind converge.TriggerKind, t converge.Trigger, why string) (converge.RunResult, error) {
	s, a := r.s, r.l.a
	if t.HealthOnly {
		s.log.Info("health checks not run: the bus is out of reach", "assignment", a.Name, "why", why)
		return converge.RunResult{}, nil
	}
	p := s.currentPlan(r.l)
	if p == nil {
		return converge.RunResult{}, fmt.Errorf("converge %s (%s): %s, and no plan of version %d for this worker's facts is cached", a.Name, kind, why, a.Version)
	}
	return s.offline(ctx, r.l, p, kind, t, why), nil
}

// checked records a clean interval check of the cached plan: the
// assignment is converged as of now, no run was needed.
func (s *assigner) checked(l *assignLoop) {
	s.mu.Lock()
	if s.loops[l.a.Name] == l {
		st := s.status[l.a.Name]
		st.LastChecked, st.LastTrigger = time.Now().UTC(), string(converge.TriggerInterval)
		s.status[l.a.Name] = st
	}
	s.mu.Unlock()
	s.publish(context.Background())
}

// online asks the coordinators for the run and waits for its end.
func (r *assignRunner) online(ctx context.Context, kind converge.TriggerKind, t converge.Trigger) (converge.RunResult, error) {
	s, a := r.s, r.l.a
	timeout := cmp.Or(s.w.cfg.ConvergeTimeout, DefaultConvergeTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer context.AfterFunc(r.stop, cancel)()
	ctx, span := s.w.tracer.Start(ctx, "converge "+a.Name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("manifold.assignment", a.Name),
		attribute.Int64("manifold.assignment_version", int64(a.Version)),
		attribute.String("manifold.trigger", string(kind)),
		attribute.Int("manifold.only", len(t.Keys)),
		attribute.Bool("manifold.health_check_only", t.HealthOnly),
		attribute.String("manifold.worker", s.w.cfg.Name),
	))
	defer span.End()
	started := time.Now()
	full := len(t.Keys) == 0 && !t.HealthOnly
	// The coordinator compiles the run with the facts this worker
	// published: publish refreshed facts first, and stamp the plan cached
	// from a full run with the digest of the facts published before it
	// was asked for (facts published later make it stale: plan.go).
	facts := s.w.factsPublished()
	if full && facts != factsDigest(s.w.facts()) {
		if err := s.w.register(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("refreshed facts not published before the run: the run compiles with the previous ones", "assignment", a.Name, "error", err)
		}
		facts = s.w.factsPublished()
	}
	poll := cmp.Or(s.w.cfg.ConvergePoll, DefaultConvergePoll)
	req := bus.ConvergeRequest{V: bus.Version, Assignment: a.Name, Version: a.Version, Trigger: string(kind),
		Only: t.Keys, Why: t.Why, HealthCheckOnly: t.HealthOnly, WaitMS: max(poll.Milliseconds(), 1)}
	var rep bus.ConvergeReply
	for {
		var err error
		rep, err = r.ask(ctx, req, poll)
		switch {
		case err != nil && ctx.Err() == nil && errors.Is(err, errNoAnswer) && s.unreachable() != "":
			span.SetStatus(codes.Error, err.Error())
			return converge.RunResult{}, fmt.Errorf("%w: %s", errUnreachable, s.unreachable())
		case err != nil && ctx.Err() == nil && (errors.Is(err, errUnreachable) || req.RunID == "" && errors.Is(err, errNoAnswer)):
			// No coordinator is there (a site's link to the hub is down),
			// or none took the request: converge from the cached plan.
			span.SetStatus(codes.Error, err.Error())
			if !errors.Is(err, errUnreachable) {
				err = fmt.Errorf("%w: %w", errUnreachable, err)
			}
			return converge.RunResult{}, err
		case err != nil && req.RunID != "" && ctx.Err() == nil && errors.Is(err, errNoAnswer):
			// The coordinator holding the request died: ask another.
			s.log.Warn("convergence run: no answer; asking again", "assignment", a.Name, "run_id", req.RunID, "error", err)
			continue
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
			return converge.RunResult{}, fmt.Errorf("converge %s (%s): %w", a.Name, kind, err)
		}
		if rep.Ended {
			break
		}
		// Still running: a long poll for its end.
		req = bus.ConvergeRequest{V: bus.Version, Assignment: a.Name, Version: a.Version, Trigger: string(kind),
			RunID: rep.RunID, WaitMS: req.WaitMS}
	}
	span.SetAttributes(attribute.String("manifold.run_id", rep.RunID), attribute.String("manifold.status", rep.Status),
		attribute.Int("manifold.changed", len(rep.Changed)), attribute.Int("manifold.failed", len(rep.Failed)))
	s.m.ran(ctx, kind, rep)
	s.w.fleet.converged(a.Name, a.Version, kind, rep) // register.go
	if !a.Noop && !t.HealthOnly {
		for _, d := range r.l.repaired(rep.Changed, started) {
			s.m.repairTime.Record(ctx, d.Seconds(), metric.WithAttributes(s.m.worker))
		}
		r.l.repaired(rep.Stable, started) // drift hinted but already gone
	}
	if full {
		if why := s.commit(ctx, r.l, rep.RunID, rep.Total, facts); why != "" {
			s.log.Info("plan not cached: interval checks run as full runs, and the assignment is not converged while the bus is out of reach",
				"assignment", a.Name, "run_id", rep.RunID, "why", why)
		}
	}
	s.mu.Lock()
	if s.loops[a.Name] == r.l {
		st := s.status[a.Name]
		st.LastRun, st.LastTrigger, st.Offline = rep.RunID, string(kind), false
		st.Cached = r.l.plan != nil
		if full && len(rep.Failed) == 0 && rep.Status != "failed" {
			st.LastChecked = time.Now().UTC()
		}
		s.status[a.Name] = st
	}
	s.mu.Unlock()
	select { // the bus answers: report what was spooled
	case s.spool.kick <- struct{}{}:
	default:
	}
	s.log.Info("convergence run ended", "assignment", a.Name, "run_id", rep.RunID, "trigger", string(kind),
		"status", rep.Status, "changed", len(rep.Changed), "failed", len(rep.Failed))
	if rep.Status == "failed" && len(rep.Failed) == 0 && rep.Error != "" {
		return converge.RunResult{}, fmt.Errorf("run %s: %s", rep.RunID, rep.Error)
	}
	return converge.RunResult{Changed: rep.Changed, Failed: rep.Failed, Stable: rep.Stable, Critical: rep.Critical}, nil
}

// errNoAnswer: no coordinator answered a convergence request in time.
var errNoAnswer = errors.New("no answer")

// ask sends one convergence request and reads its reply; the coordinator
// holds it at most poll (plus a margin for the bus).
func (r *assignRunner) ask(ctx context.Context, req bus.ConvergeRequest, poll time.Duration) (bus.ConvergeReply, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return bus.ConvergeReply{}, err
	}
	msg := nats.NewMsg(bus.ConvergeSubject(r.s.w.cfg.Name))
	msg.Data = data
	bus.InjectTrace(ctx, msg.Header)
	rctx, cancel := context.WithTimeout(ctx, poll+convergeMargin)
	defer cancel()
	resp, err := r.s.w.bus.Conn().RequestMsgWithContext(rctx, msg)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return bus.ConvergeReply{}, fmt.Errorf("%w: no coordinator answers", errUnreachable)
	case errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting):
		return bus.ConvergeReply{}, fmt.Errorf("%w: %w", errUnreachable, err)
	case err != nil && ctx.Err() == nil && rctx.Err() != nil:
		return bus.ConvergeReply{}, fmt.Errorf("%w within %s", errNoAnswer, poll+convergeMargin)
	case err != nil:
		return bus.ConvergeReply{}, err
	}
	var rep bus.ConvergeReply
	if err := json.Unmarshal(resp.Data, &rep); err != nil {
		return bus.ConvergeReply{}, fmt.Errorf("reply: %w", err)
	}
	if rep.ErrorReply.Error != nil {
		return bus.ConvergeReply{}, rep.ErrorReply.Error
	}
	return rep, nil
}

// convergeMargin is the time a convergence request is given beyond the
// wait the coordinator may hold it.
const convergeMargin = 15 * time.Second

// DefaultConvergePoll is the default of Config.ConvergePoll.
const DefaultConvergePoll = 30 * time.Second

// assignMetrics are the convergence instruments.
type assignMetrics struct {
	driftEvents metric.Int64Counter
	repairTime  metric.Float64Histogram
	repairs     metric.Int64Counter
	runs        metric.Int64Counter
	flaps       metric.Int64Counter
	worker      attribute.KeyValue
}

func newAssignMetrics(mp metric.MeterProvider, name string) (*assignMetrics, error) {
	meter := mp.Meter("github.com/manifold-run/manifold/worker")
	m := &assignMetrics{worker: attribute.String("worker", name)}
	var err error
	if m.driftEvents, err = meter.Int64Counter("manifold.converge.drift_events", metric.WithUnit("{event}"),
		metric.WithDescription("Drift hinted by events, by resource type (overflows: type all).")); err != nil {
		return nil, err
	}
	if m.repairTime, err = meter.Float64Histogram("manifold.converge.repair.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the first event hinting a resource's drift to its repaired outcome.")); err != nil {
		return nil, err
	}
	if m.repairs, err = meter.Int64Counter("manifold.converge.repairs", metric.WithUnit("{resource}"),
		metric.WithDescription("Resources a convergence run changed (repaired), by trigger.")); err != nil {
		return nil, err
	}
	if m.runs, err = meter.Int64Counter("manifold.converge.runs", metric.WithUnit("{run}"),
		metric.WithDescription("Convergence runs of assignments, by trigger and status.")); err != nil {
		return nil, err
	}
	if m.flaps, err = meter.Int64Counter("manifold.converge.flapping", metric.WithUnit("{resource}"),
		metric.WithDescription("Resources found flapping (another writer fighting manifold; repairs backed off).")); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *assignMetrics) drift(ctx context.Context, ref string) {
	typ, _, ok := strings.Cut(ref, "#")
	if !ok || ref == "" {
		typ = "all"
	}
	m.driftEvents.Add(ctx, 1, metric.WithAttributes(m.worker, attribute.String("resource.type", typ)))
}

func (m *assignMetrics) ran(ctx context.Context, kind converge.TriggerKind, rep bus.ConvergeReply) {
	trig := attribute.String("trigger", string(kind))
	m.runs.Add(ctx, 1, metric.WithAttributes(m.worker, trig, attribute.String("status", rep.Status)))
	if len(rep.Changed) > 0 {
		m.repairs.Add(ctx, int64(len(rep.Changed)), metric.WithAttributes(m.worker, trig))
	}
}

// ranOffline counts a run carried out from the cached plan (status
// offline).
func (m *assignMetrics) ranOffline(ctx context.Context, kind converge.TriggerKind, res converge.RunResult) {
	trig := attribute.String("trigger", string(kind))
	m.runs.Add(ctx, 1, metric.WithAttributes(m.worker, trig, attribute.String("status", "offline")))
	if len(res.Changed) > 0 {
		m.repairs.Add(ctx, int64(len(res.Changed)), metric.WithAttributes(m.worker, trig))
	}
}

func (m *assignMetrics) flapping(ctx context.Context, ref string) {
	typ, _, _ := strings.Cut(ref, "#")
	m.flaps.Add(ctx, 1, metric.WithAttributes(m.worker, attribute.String("resource.type", typ)))
}

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/converge"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/compile"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// watchOpts are apply's --watch flags.
type watchOpts struct {
	enabled        bool
	interval       time.Duration
	healthInterval time.Duration
	// servicePoll is the period of the poll of the services' units.
	servicePoll time.Duration
}

// watchRun is one embedded `apply --watch`: the engine, the compiled
// plan and the request every convergence run starts from.
type watchRun struct {
	st     IO
	eng    *embedded
	tree   *compile.Tree
	req    bus.RunRequest
	output string
	// runTimeout bounds each convergence run (--timeout).
	runTimeout time.Duration
	facts      map[string]any
	jaegerURL  string
	logger     *slog.Logger

	mu    sync.Mutex // serialises output
	first bool       // the start run has not been printed yet
	// limited is set once settle has put the idle soft memory limit in
	// place (GOMEMLIMIT not set): runs lift it (runLimit).
	limited bool
	// tunedGC is set once settle has set watchGCPercent (GOGC not set):
	// runs use runGCPercent (runLimit).
	tunedGC bool
	// liveHeap reads the live heap (tests); nil reads the runtime's.
	liveHeap func() uint64
}

// runWatch converges once, then keeps the manifest's resources converged
// until ctx ends (SIGINT, SIGTERM): a repair run of the resources an event
// hinted (and the resources they refresh), a full check every --interval,
// health checks every --health-interval with a full remediation run when
// one is CRITICAL. Every convergence is an ordinary run with its trigger.
// It returns 0 once stopped, whatever the runs found (they are reported);
// 3 when the watch could not start.
func runWatch(ctx context.Context, w *watchRun, o watchOpts) int {
	w.first = true
	hints := make(chan converge.Hint, 4096)
	pw, err := converge.NewPathWatcher(hints)
	if err != nil {
		fmt.Fprintf(w.st.Stderr, "manifold apply: --watch: %v\n", err)
		return ExitUnavailable
	}
	defer pw.Close()
	uw := converge.NewUnitWatcher(converge.UnitWatcherConfig{Interval: o.servicePoll, Logger: w.logger}, hints)
	kw := converge.NewKVWatcher(w.eng.bus, hints)
	defer kw.Close()
	built := w.build()
	watched, polling := w.watch(built, pw, uw, kw)
	if uw.Units() > 0 {
		uw.Start(ctx)
		defer uw.Stop()
	}
	checks := make([]converge.LocalCheck, len(built))
	for i, b := range built {
		checks[i] = b.check
	}
	built = nil
	noop := w.req.Noop
	what := "repairing drift"
	if noop {
		what = "reporting drift (noop: nothing is repaired)"
	}
	var how string
	switch {
	case polling:
		how = fmt.Sprintf("%d resources watched, the others by interval checks only (the inotify limit was reached)", watched)
	default:
		how = fmt.Sprintf("%d of %d resources watched", watched, len(w.tree.Plan.Manifest.Resources))
	}
	if w.output != "json" {
		defer fmt.Fprintln(w.st.Stdout, "watch stopped")
	}
	defer writeProfiles(w.st)
	w.logger.Info("watching", "resources", len(w.tree.Plan.Manifest.Resources), "watched", watched, "polling", polling,
		"units", uw.Units(), "kv_entries", kw.Entries())
	cfg := converge.LoopConfig{Interval: o.interval, HealthInterval: o.healthInterval, Noop: noop, Logger: w.logger,
		OnStatus: func(s converge.Status) {
			if s.State == converge.StateFlapping && w.output != "json" {
				w.mu.Lock()
				fmt.Fprintf(w.st.Stdout, "flapping: %v changed by another writer again and again: repairs backed off\n", s.Flapping)
				w.mu.Unlock()
			}
		}}
	started := false
	runner := converge.RunnerFunc(func(ctx context.Context, t converge.Trigger) (converge.RunResult, error) {
		if started {
			defer w.runLimit()()
		}
		res, err := w.converge(ctx, t)
		if !started && err == nil {
			started = true
			w.settle()
			if w.output != "json" {
				w.mu.Lock()
				fmt.Fprintf(w.st.Stdout, "watching: %s, %s; full check every %s\n", what, how, o.interval)
				w.mu.Unlock()
			}
		}
		return res, err
	})
	interval := converge.CheckFirst(func() []converge.LocalCheck { return checks }, runner, w.printPass)
	if err := converge.Loop(ctx, cfg, interval, hints); err != nil {
		fmt.Fprintf(w.st.Stderr, "manifold apply: --watch: %v\n", err)
		return ExitUnavailable
	}
	return ExitOK
}

// builtResource is one resource of the plan as the watch sees it: what
// the interval pass checks, and what it is watched through.
type builtResource struct {
	check   converge.LocalCheck
	targets []resources.WatchTarget
}

// build renders and builds every resource of the plan once, with this
// host's facts as the worker renders them: the interval pass checks them
// from this cache (no compile, no bus), the watchers watch their targets.
// A resource the pass cannot check as a run would (its type runs on the
// coordinator, it has control guards or health checks, it failed to
// render or build) has a nil Res: every interval pass hands it to a run.
func (w *watchRun) build() []builtResource {
	reg := workerRegistry(w.eng.bus)
	environ := environMap()
	scope := template.Scope{Data: w.tree.Plan.Data, Facts: w.facts, Environ: environ, Dir: w.req.WorkDir}
	root := w.req.WorkDir
	if w.req.Entry != "" && root != "" {
		for d := path.Dir(w.req.Entry); d != "." && d != "/"; d = path.Dir(d) {
			root = filepath.Dir(root)
		}
	}
	env := &resources.Env{WorkDir: w.req.WorkDir, Root: root, Runner: resources.OSRunner{}, Logger: w.logger,
		Data: w.tree.Plan.Data, Facts: w.facts, Environ: environ}
	out := make([]builtResource, 0, len(w.tree.Plan.Manifest.Resources))
	for _, r := range w.tree.Plan.Manifest.Resources {
		b := builtResource{check: converge.LocalCheck{Key: r.Ref(), Env: env}}
		out = append(out, b)
		spec, err := resources.RenderSpec(r, scope)
		if err != nil {
			continue // the run reports it
		}
		res, err := reg.New(spec)
		if err != nil {
			continue
		}
		if wt, ok := res.(resources.Watcher); ok {
			out[len(out)-1].targets = wt.WatchTargets()
		}
		if r.Control == nil && len(r.HealthChecks) == 0 {
			out[len(out)-1].check.Res = res
		}
	}
	return out
}

// watch registers the watch targets of the built resources: paths with
// inotify, units with the unit poll, KV entries with KV watches. It
// returns how many resources are watched and whether the inotify limit
// stopped it (the rest is covered by interval checks).
func (w *watchRun) watch(built []builtResource, pw *converge.PathWatcher, uw *converge.UnitWatcher, kw *converge.KVWatcher) (watched int, polling bool) {
	for _, b := range built {
		if len(b.targets) == 0 {
			continue
		}
		key := b.check.Key
		uw.Set(key, b.targets)
		if err := kw.Set(key, b.targets); err != nil {
			w.logger.Warn("not watched", "resource", key, "error", err)
		}
		if err := pw.Set(key, b.targets); err != nil {
			if errors.Is(err, converge.ErrWatchLimit) {
				if !polling {
					fmt.Fprintf(w.st.Stderr, "manifold apply: --watch: %v\n", err)
				}
				polling = true
				continue
			}
			w.logger.Warn("not watched", "resource", key, "error", err)
			continue
		}
		watched++
	}
	return watched, polling
}

// intervalPass is the JSON line of an interval pass (--output json): one
// per pass, before the report of the run that repairs what it found (none
// when nothing drifted).
type intervalPass struct {
	Trigger    string   `json:"trigger"`
	Checked    int      `json:"checked"`
	Drifted    int      `json:"drifted"`
	Stable     int      `json:"stable"`
	Resources  []string `json:"drifted_resources,omitempty"`
	DurationUS int64    `json:"duration_us"`
}

// printPass reports an interval pass: nothing in text (the run that
// follows a drift prints its lines), one JSON line in json.
func (w *watchRun) printPass(p converge.PassResult) {
	ms := float64(p.Duration.Microseconds()) / 1000
	w.logger.Info("interval check", "checked", p.Checked, "drifted", len(p.Drifted), "duration_ms", ms)
	if w.output != "json" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = json.NewEncoder(w.st.Stdout).Encode(intervalPass{Trigger: string(converge.TriggerInterval), Checked: p.Checked,
		Drifted: len(p.Drifted), Stable: len(p.Stable), Resources: p.Drifted, DurationUS: p.Duration.Microseconds()})
}

// converge runs one convergence to its end and reads its report.
func (w *watchRun) converge(ctx context.Context, t converge.Trigger) (converge.RunResult, error) {
	plan := w.tree.Plan
	if len(t.Keys) > 0 {
		sub, err := repairPlan(plan, t.Keys)
		if err != nil {
			return converge.RunResult{}, err
		}
		plan = sub
	}
	req := w.req
	req.RunID = coordinator.NewRunID()
	req.Trigger = string(t.Kind)
	if t.HealthOnly {
		req.HealthCheckOnly = true
	}
	w.eng.plans.put(req.RunID, plan)
	ctx, cancel := context.WithTimeout(ctx, w.runTimeout)
	defer cancel()
	if err := w.eng.bus.SubmitRun(ctx, req, req.RunID); err != nil {
		return converge.RunResult{}, fmt.Errorf("submit run: %w", err)
	}
	if err := w.eng.bus.FollowEvents(ctx, req.RunID, func(ev bus.Event) bool {
		return !(ev.Kind == bus.EventRunFinished && ev.RunID == req.RunID)
	}, bus.EventRunRejected, bus.EventRunFinished); err != nil {
		return converge.RunResult{}, fmt.Errorf("run %s: %w", req.RunID, err)
	}
	rep, err := coordinator.GetReport(ctx, w.eng.bus, req.RunID)
	if err != nil {
		return converge.RunResult{}, fmt.Errorf("run %s: report: %w", req.RunID, err)
	}
	w.print(rep, t)
	sum := coordinator.ConvergeSummary(rep)
	return converge.RunResult{Changed: sum.Changed, Failed: sum.Failed, Stable: sum.Stable, Critical: sum.Critical}, nil
}

// minSpreadRepair is the size from which a repair run of independent
// files is spread over the worker's slots (see repairPlan): below it,
// one segment does the work.
const minSpreadRepair = 64

// repairPlan is the plan of a repair run of keys (compile.Subset). When
// it holds at least minSpreadRepair resources, all independent files (see
// independentFile) with no edge between them, it runs in ordering: graph,
// so its segments go side by side to every slot of the worker (a storm of
// thousands of edits repaired on both cores, not one segment after
// another on one), and its files are grouped by directory (manifest order
// within one): a segment then holds the files of one or two directories,
// opened once for it (safefs.Dirs), not one walk from "/" per file as
// when a manifest spreads its files over many directories. Such files
// read and write only their own path, so the order among them is not
// observable, and each keeps its check, atomic write and re-check.
// Anything else keeps the manifest's ordering.
func repairPlan(plan *compile.Plan, keys []string) (*compile.Plan, error) {
	sub, err := compile.Subset(plan, keys)
	if err != nil {
		return nil, err
	}
	m := sub.Manifest
	if m.Ordering == schemas.OrderingGraph || len(m.Resources) < minSpreadRepair {
		return sub, nil
	}
	for i, r := range m.Resources {
		if !independentFile(r) || len(sub.Requires[i]) > 0 || len(sub.Subscribes[i]) > 0 ||
			len(sub.External[i]) > 0 || len(sub.ExternalSubscribes[i]) > 0 {
			return sub, nil
		}
	}
	gm := *m
	gm.Ordering = schemas.OrderingGraph
	// Each directory worked out once, not twice per comparison.
	order := make([]int, len(m.Resources))
	dirs := make([]string, len(m.Resources))
	for i, r := range m.Resources {
		order[i], dirs[i] = i, path.Dir(r.Name)
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(dirs[a], dirs[b]) })
	gm.Resources = make([]schemas.Resource, len(order))
	for i, k := range order {
		gm.Resources[i] = m.Resources[k]
	}
	return compile.Subset(&compile.Plan{Manifest: &gm, Data: sub.Data, PreMessage: sub.PreMessage, PostMessage: sub.PostMessage}, keys)
}

// independentFile reports whether r is a file resource whose run reads
// and writes nothing but its own path: a regular file with content (not
// a directory, a removal, a source or a followed link), no control, health
// check, registration, retry or target.
func independentFile(r schemas.Resource) bool {
	if r.Type != "file" || (r.Ensure != "" && r.Ensure != "present") || r.Control != nil ||
		len(r.HealthChecks) > 0 || len(r.RegisterWhenStable) > 0 || r.Retry > 0 || r.Target != "" {
		return false
	}
	p := r.Properties
	if _, ok := p["content"]; !ok {
		return false
	}
	if _, ok := p["source"]; ok {
		return false
	}
	if e, ok := p["ensure"]; ok && e != "present" {
		return false
	}
	links, _ := p["links"].(string)
	return links != "follow"
}

// print writes a convergence run's outcome: in json one report per line;
// in text, the start run as apply prints it, then for each later run only
// the resources that changed or failed, with what triggered the run.
func (w *watchRun) print(rep *coordinator.Report, t converge.Trigger) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.output == "json" {
		_ = writeReport(w.st.Stdout, rep, false)
		return
	}
	first := w.first
	w.first = false
	printWatchRun(w.st.Stdout, rep, t, first, w.req.Noop)
}

// printWatchRun prints one convergence run in text.
func printWatchRun(out io.Writer, rep *coordinator.Report, t converge.Trigger, full, noop bool) {
	for _, r := range rep.Resources {
		quiet := r.Status == string(bus.TaskStable) || r.Status == string(bus.TaskSkipped)
		if quiet && !full {
			continue
		}
		status := r.Status
		if noop && r.Status == string(bus.TaskChanged) {
			status = "would change"
		}
		detail := r.Message
		if r.Error != "" {
			detail = r.Error
		}
		detail = firstLine(detail)
		if detail == "" && r.Status == string(bus.TaskStable) {
			detail = "in the desired state"
		}
		why := ""
		if !full {
			why = " [" + triggerText(t, r.Ref) + "]"
		}
		fmt.Fprintf(out, "%-12s %s: %s%s\n", status, r.Ref, detail, why)
	}
	if full || rep.Counts.Changed > 0 || rep.Counts.Failed > 0 {
		c := rep.Counts
		changed := "changed"
		if noop {
			changed = "would change"
		}
		fmt.Fprintf(out, "run %s (%s) %s in %s: %d resources, %d %s, %d failed\n",
			rep.RunID, t.Kind, rep.Status, fmtMS(rep.DurationMS), c.Total, c.Changed, changed, c.Failed)
	}
}

// triggerText is what triggered a resource's check: the event that hinted
// it, or the run's trigger.
func triggerText(t converge.Trigger, ref string) string {
	if why := t.Why[ref]; why != "" {
		return string(t.Kind) + ": " + why
	}
	if why := t.Why[""]; why != "" {
		return string(t.Kind) + ": " + why
	}
	if t.Kind == converge.TriggerDrift {
		return "refresh"
	}
	return string(t.Kind)
}

// environMap is the process's environment as templates see it.
func environMap() map[string]string {
	env := os.Environ()
	m := make(map[string]string, len(env))
	for _, kv := range env {
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				m[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	return m
}

// The embedded engine of apply --watch lives for days. Nobody else can
// reach its server (no listener) and it has one coordinator, so:
const (
	// watchScanInterval: the coordinator looks for runs whose
	// coordinator died (there is no other) every 30s, not every second
	// (each scan is a consumer on the runs bucket: ~0.1 % of a core).
	watchScanInterval = 30 * time.Second
	// watchRetention is how long events and task outcomes of finished
	// runs stay in the memory store beyond the longest run (--timeout):
	// not the 24h of a server, which a fight repaired every few seconds
	// would fill with a day of runs.
	watchRetention = 10 * time.Minute
	// watchGCPercent and watchMemoryLimit replace the one-shot GC tuning
	// of apply (GOGC=400, 224 MiB soft limit: a heap four times the live
	// one) once the start run is done; the limit is at least twice the
	// live heap then. GOGC and GOMEMLIMIT set in the environment win.
	watchGCPercent   = 100
	watchMemoryLimit = 96 << 20
	// runGCPercent is the GC's target during a convergence run of a
	// watch, as a one-shot apply's: a storm's repair run allocates its
	// tasks, outcomes and report, and at GOGC=100 the collector took 4 %
	// of the storm's CPU. The idle watchGCPercent is set again after it.
	runGCPercent = 400
)

// watchBusConfig is cfg for a watching engine: events and outcomes kept
// for the longest run (runTimeout) and watchRetention more.
func watchBusConfig(cfg bus.Config, runTimeout time.Duration) bus.Config {
	keep := max(runTimeout, time.Minute) + watchRetention
	cfg.EventsMaxAge, cfg.ResultsTTL = keep, keep
	return cfg
}

// settle readies the process for a long watch once the start run is done:
// the GC of a long-lived process (the live heap is small; a one-shot
// apply's GOGC=400 let it grow to four times that), and the memory the
// compile and the start run used is given back to the system.
func (w *watchRun) settle() {
	if os.Getenv("GOGC") == "" {
		w.tunedGC = true
		debug.SetGCPercent(watchGCPercent)
	}
	debug.FreeOSMemory() // collects first
	if os.Getenv("GOMEMLIMIT") == "" {
		w.limited = true
		w.idleLimit()
	}
	startIdleProfile(w.st)
}

// idleLimit sets the soft memory limit of an idle watch: twice the live
// heap at least (a limit near the live heap would make the collector run
// without end: a very large plan, or the outcomes of a storm's runs kept
// for watchRetention), watchMemoryLimit at least.
func (w *watchRun) idleLimit() {
	live := w.liveHeap
	if live == nil {
		live = runtimeLiveHeap
	}
	debug.SetMemoryLimit(max(int64(watchMemoryLimit), 2*int64(live())))
}

// runLimit lifts the idle soft memory limit for a convergence run and
// returns what puts it back, from the live heap after the run. A run of
// thousands of repairs (a storm) holds more than the idle limit: under
// it the collector ran without end and took half the storm's CPU (41 s of
// CPU for 10,000 repairs, 9 s without). GOGC still bounds the heap.
func (w *watchRun) runLimit() (restore func()) {
	if w.tunedGC {
		debug.SetGCPercent(runGCPercent)
	}
	if w.limited {
		debug.SetMemoryLimit(math.MaxInt64)
	}
	return func() {
		if w.tunedGC {
			debug.SetGCPercent(watchGCPercent)
		}
		if w.limited {
			w.idleLimit()
		}
	}
}

// runtimeLiveHeap is the heap marked live by the last collection.
func runtimeLiveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		return s[0].Value.Uint64()
	}
	return 0
}

// startIdleProfile starts a CPU profile of the watch after its start run
// into $MANIFOLD_WATCH_CPU_PROFILE when set (the whole command's is
// MANIFOLD_CPU_PROFILE's): what the idle watch spends, without the start.
func startIdleProfile(st IO) {
	path := os.Getenv("MANIFOLD_WATCH_CPU_PROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold: MANIFOLD_WATCH_CPU_PROFILE: %v\n", err)
	}
}

// writeProfiles ends the watch's CPU profile (startIdleProfile) and
// writes the heap profile to $MANIFOLD_HEAP_PROFILE when set (go tool
// pprof FILE): how the idle figures of docs/converge.md were explained.
func writeProfiles(st IO) {
	if os.Getenv("MANIFOLD_WATCH_CPU_PROFILE") != "" {
		pprof.StopCPUProfile()
	}
	path := os.Getenv("MANIFOLD_HEAP_PROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err == nil {
		runtime.GC()
		err = pprof.WriteHeapProfile(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold: MANIFOLD_HEAP_PROFILE: %v\n", err)
	}
}

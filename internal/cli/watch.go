package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/converge"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/compile"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/template"
)

// watchOpts are apply's --watch flags.
type watchOpts struct {
	enabled        bool
	interval       time.Duration
	healthInterval time.Duration
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
	watched, polling := w.watchTargets(pw)
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
	w.logger.Info("watching", "resources", len(w.tree.Plan.Manifest.Resources), "watched", watched, "polling", polling)
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
		res, err := w.converge(ctx, t)
		if !started && err == nil {
			started = true
			if w.output != "json" {
				w.mu.Lock()
				fmt.Fprintf(w.st.Stdout, "watching: %s, %s; full check every %s\n", what, how, o.interval)
				w.mu.Unlock()
			}
		}
		return res, err
	})
	if err := converge.Loop(ctx, cfg, runner, hints); err != nil {
		fmt.Fprintf(w.st.Stderr, "manifold apply: --watch: %v\n", err)
		return ExitUnavailable
	}
	return ExitOK
}

// watchTargets registers the watch targets of every resource of the plan
// that has some, rendered with this host's facts as the worker renders
// them. It returns how many resources are watched and whether the
// inotify limit stopped it (the rest is covered by interval checks).
func (w *watchRun) watchTargets(pw *converge.PathWatcher) (watched int, polling bool) {
	reg := workerRegistry(w.eng.bus)
	scope := template.Scope{Data: w.tree.Plan.Data, Facts: w.facts, Environ: environMap(), Dir: w.req.WorkDir}
	for _, r := range w.tree.Plan.Manifest.Resources {
		spec, err := resources.RenderSpec(r, scope)
		if err != nil {
			continue // the run reports it; the interval covers it
		}
		res, err := reg.New(spec)
		if err != nil {
			continue
		}
		wt, ok := res.(resources.Watcher)
		if !ok {
			continue
		}
		targets := wt.WatchTargets()
		if len(targets) == 0 {
			continue
		}
		if err := pw.Set(r.Ref(), targets); err != nil {
			if errors.Is(err, converge.ErrWatchLimit) {
				if !polling {
					fmt.Fprintf(w.st.Stderr, "manifold apply: --watch: %v\n", err)
				}
				polling = true
				continue
			}
			w.logger.Warn("not watched", "resource", r.Ref(), "error", err)
			continue
		}
		watched++
	}
	return watched, polling
}

// converge runs one convergence to its end and reads its report.
func (w *watchRun) converge(ctx context.Context, t converge.Trigger) (converge.RunResult, error) {
	plan := w.tree.Plan
	if len(t.Keys) > 0 {
		sub, err := compile.Subset(plan, t.Keys)
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

// print writes a convergence run's outcome: in json one report per line;
// in text, the start run as apply prints it, then for each later run only
// the resources that changed or failed, with what triggered the run.
func (w *watchRun) print(rep *coordinator.Report, t converge.Trigger) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.output == "json" {
		_ = json.NewEncoder(w.st.Stdout).Encode(rep)
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

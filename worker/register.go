package worker

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/converge"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/template"
)

// registrationTimeout bounds one registrations() lookup or one
// register_when_stable publication.
const registrationTimeout = 10 * time.Second

// lookupRegistrations answers registrations() in templates rendered on
// this worker (template.Scope.Registrations).
func (w *Worker) lookupRegistrations(cluster, protocol, service, address string) (template.Registrations, error) {
	ctx, cancel := context.WithTimeout(context.Background(), registrationTimeout)
	defer cancel()
	entries, err := w.bus.Registrations(ctx, cluster, protocol, service, address)
	if err != nil {
		return nil, err
	}
	out := make(template.Registrations, len(entries))
	for i, e := range entries {
		out[i] = template.Registration{Cluster: e.Cluster, Service: e.Service, Protocol: e.Protocol, Address: e.Address,
			Port: e.Port, Priority: e.Priority, TTL: e.TTL, Annotations: e.Annotations, Worker: e.Worker}
	}
	return out, nil
}

// afterExecute runs after a resource was executed (not skipped before):
// it publishes the resource's register_when_stable entries when it is
// stable, and notes the run for the fleet view. A registration that fails
// fails the resource (o), naming the entry.
func (w *Worker) afterExecute(ctx context.Context, task bus.Task, env *resources.Env, o *bus.Outcome, log *slog.Logger) {
	if err := w.registerWhenStable(ctx, task, env, *o); err != nil {
		o.Status, o.Error = bus.TaskFailed, err.Error()
		log.Warn("register_when_stable failed", "error", err)
	}
	w.fleet.pinned(w.cfg.Name, task, *o)
}

// registerWhenStable publishes the entries of task's resource when CCM's
// gate holds: entries declared, not noop, not failed (nor skipped), and
// every health check OK (WARNING is not OK). A health-check-only run
// registers when it ran checks and all were OK, so health checks keep the
// entries alive between full runs.
func (w *Worker) registerWhenStable(ctx context.Context, task bus.Task, env *resources.Env, o bus.Outcome) error {
	raw := task.Resource.RegisterWhenStable
	if len(raw) == 0 || task.Noop || (o.Status != bus.TaskChanged && o.Status != bus.TaskStable) {
		return nil
	}
	if task.HealthCheckOnly && len(o.HealthChecks) == 0 {
		return nil
	}
	for _, hc := range o.HealthChecks {
		if hc.Status != string(resources.HealthOK) && !hc.Ignored {
			return nil
		}
	}
	scope := template.Scope{Data: task.Data, Facts: w.facts(), Environ: environ(), Registrations: w.lookupRegistrations}
	if env != nil {
		scope.Dir = env.WorkDir
	}
	ctx, cancel := context.WithTimeout(ctx, registrationTimeout)
	defer cancel()
	for i, m := range raw {
		e, err := renderRegistration(m, scope)
		if err != nil {
			return fmt.Errorf("%s: register_when_stable[%d]: %w", task.Resource.Ref(), i, err)
		}
		e.Worker, e.Resource = w.cfg.Name, task.Resource.Ref()
		if err := w.bus.Register(ctx, e); err != nil {
			return fmt.Errorf("%s: register_when_stable[%d]: %w", task.Resource.Ref(), i, err)
		}
	}
	return nil
}

// renderRegistration renders one raw entry over scope and decodes it.
func renderRegistration(m map[string]any, scope template.Scope) (bus.RegistrationEntry, error) {
	v, err := template.RenderValue(m, scope)
	if err != nil {
		return bus.RegistrationEntry{}, err
	}
	var e bus.RegistrationEntry
	rendered, _ := v.(map[string]any)
	str := func(k string) (string, error) {
		switch x := rendered[k].(type) {
		case nil:
			return "", nil
		case string:
			return x, nil
		default:
			return fmt.Sprint(x), nil
		}
	}
	num := func(k string) (int, error) {
		switch x := rendered[k].(type) {
		case nil:
			return 0, nil
		case int:
			return x, nil
		case int64:
			return int(x), nil
		case float64:
			if x != float64(int(x)) {
				return 0, fmt.Errorf("%s: %v is not a whole number", k, x)
			}
			return int(x), nil
		case string:
			var n int
			if _, err := fmt.Sscanf(x, "%d", &n); err != nil || fmt.Sprint(n) != x {
				return 0, fmt.Errorf("%s: %q is not a whole number", k, x)
			}
			return n, nil
		default:
			return 0, fmt.Errorf("%s: %T is not a whole number", k, x)
		}
	}
	for _, f := range []struct {
		k   string
		dst *string
	}{{"cluster", &e.Cluster}, {"service", &e.Service}, {"protocol", &e.Protocol}, {"address", &e.Address}, {"ttl", &e.TTL}} {
		if *f.dst, err = str(f.k); err != nil {
			return e, err
		}
	}
	if e.Port, err = num("port"); err != nil {
		return e, err
	}
	if e.Priority, err = num("priority"); err != nil {
		return e, err
	}
	if a, ok := rendered["annotations"].(map[string]any); ok {
		e.Annotations = make(map[string]string, len(a))
		for k, v := range a {
			e.Annotations[k] = fmt.Sprint(v)
		}
	}
	if err := e.Validate(); err != nil {
		return e, err
	}
	return e, nil
}

// LastRun is the last run a worker took part in, for `manifold fleet`.
type LastRun struct {
	// RunID is the run's ID: a convergence run of an assignment, or the
	// root run of a fan-out (or other run) pinned to this worker.
	RunID string `json:"run_id"`
	// Status is the run's status for a convergence run (succeeded,
	// failed); for a pinned run, failed when a resource this worker
	// executed failed, else succeeded (the run may still be going on).
	Status string `json:"status"`
	// Time is when the run ended (convergence) or this worker's last
	// resource of it finished (pinned).
	Time time.Time `json:"time"`
	// Trigger and Assignment are set for convergence runs.
	Trigger    string `json:"trigger,omitempty"`
	Assignment string `json:"assignment,omitempty"`
}

// Drifts counts the repair runs of one assignment: convergence runs
// triggered by drift, an interval check or a failed health check that
// changed something, since the worker took the assignment's current
// version.
type Drifts struct {
	Count int       `json:"count"`
	Since time.Time `json:"since"`
}

// FleetStatus is what a worker's entry tells `manifold fleet` beyond its
// registration: its last run and its drift repairs per assignment. It is
// kept in memory and restarts with the worker.
type FleetStatus struct {
	LastRun *LastRun          `json:"last_run,omitempty"`
	Drifts  map[string]Drifts `json:"drifts,omitempty"`
}

// fleetNotes collects a worker's FleetStatus.
type fleetNotes struct {
	mu      sync.Mutex
	last    *LastRun
	drifts  map[string]Drifts
	version map[string]uint64
}

// pinned notes a resource executed for a run pinned to this worker
// (fan-out children and other pinned runs, not convergence runs, which
// converged notes with the run's real status).
func (f *fleetNotes) pinned(worker string, task bus.Task, o bus.Outcome) {
	if task.Pool != bus.PinnedPool(worker) || task.Assignment != "" {
		return
	}
	id := task.RootRunID
	if id == "" {
		id = task.RunID
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	status := "succeeded"
	if f.last != nil && f.last.RunID == id && f.last.Status == "failed" || o.Status == bus.TaskFailed {
		status = "failed"
	}
	f.last = &LastRun{RunID: id, Status: status, Time: time.Now().UTC()}
}

// converged notes a convergence run of an assignment (version) that ended
// with rep.
func (f *fleetNotes) converged(assignment string, version uint64, trigger converge.TriggerKind, rep bus.ConvergeReply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now().UTC()
	f.last = &LastRun{RunID: rep.RunID, Status: rep.Status, Time: now, Trigger: string(trigger), Assignment: assignment}
	if f.drifts == nil {
		f.drifts, f.version = map[string]Drifts{}, map[string]uint64{}
	}
	d, ok := f.drifts[assignment]
	if !ok || f.version[assignment] != version {
		d = Drifts{Since: now}
		f.version[assignment] = version
	}
	switch trigger {
	case converge.TriggerDrift, converge.TriggerInterval, converge.TriggerHealth:
		if len(rep.Changed) > 0 {
			d.Count++
		}
	}
	f.drifts[assignment] = d
}

// status returns the notes for the worker's entry (nil when empty).
func (f *fleetNotes) status() *FleetStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil && len(f.drifts) == 0 {
		return nil
	}
	s := &FleetStatus{Drifts: maps.Clone(f.drifts)}
	if f.last != nil {
		l := *f.last
		s.LastRun = &l
	}
	return s
}

package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/converge"
)

// DefaultSpoolMax is the default of Config.SpoolMax: the offline runs a
// worker keeps until it can report them.
const DefaultSpoolMax = 1000

// errUnreachable: the bus or every coordinator is out of reach; the
// worker converges from its cached plan instead.
var errUnreachable = errors.New("bus unreachable")

// reachable returns why the coordinators cannot be asked now ("" when
// they may be).
func (s *assigner) unreachable() string {
	if st := s.w.bus.Conn().Status(); st != nats.CONNECTED {
		return "connection " + strings.ToLower(st.String())
	}
	return ""
}

// newOfflineRunID returns a run ID for an offline run: its time to the
// millisecond, "off" and random hex, a subject token sorted by time.
func newOfflineRunID(now time.Time) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return strings.Replace(now.UTC().Format("20060102T150405.000Z"), ".", "", 1) + offlineMark + hex.EncodeToString(b[:])
}

// offlineMark is in every offline run's ID.
const offlineMark = "-off-"

// offline carries out one convergence of l from its cached plan p, on this
// host alone, as a run would: the hinted resources and the resources
// subscribing to them (transitively), or every resource for a full
// trigger, in the plan's order; each through the resource engine (check,
// apply, re-check), refreshed when a resource it subscribes to changed
// in this run or a refresh is owed, its refresh debts recorded and paid;
// a resource requiring one that failed or was skipped is skipped. The
// run is spooled for the coordinators.
func (s *assigner) offline(ctx context.Context, l *assignLoop, p *plan, kind converge.TriggerKind, t converge.Trigger, why string) converge.RunResult {
	started := time.Now()
	run := bus.OfflineRun{RunID: newOfflineRunID(started), Trigger: string(kind), AssignmentVersion: p.Version,
		Manifest: p.Manifest, Noop: p.Noop, StartedAt: started.UTC(), Why: why}
	selected := selectOffline(p, t.Keys)
	log := s.log.With("assignment", l.a.Name, "run_id", run.RunID, "offline", true)
	changed := map[string]bool{}
	ended := map[string]bool{} // failed or skipped
	var res converge.RunResult
	for _, task := range p.Tasks {
		ref := task.Resource.Ref()
		if !selected[ref] {
			continue
		}
		run.Total++
		o := s.executeOffline(ctx, run.RunID, task, changed, ended, log)
		if err := s.w.debts.settle(context.WithoutCancel(ctx), task, o.engine); err != nil {
			log.Error("refresh debt not recorded", "resource", ref, "error", err)
		}
		switch o.engine.Status {
		case bus.TaskChanged:
			changed[ref] = true
			res.Changed = append(res.Changed, ref)
		case bus.TaskFailed:
			ended[ref] = true
			res.Failed = append(res.Failed, ref)
		case bus.TaskSkipped:
			ended[ref] = true
		default:
			res.Stable = append(res.Stable, ref)
		}
		if o.engine.Status == bus.TaskStable {
			run.Stable++
			continue
		}
		if len(run.Outcomes) == bus.MaxOfflineOutcomes {
			run.Omitted++
			continue
		}
		run.Outcomes = append(run.Outcomes, bus.OfflineOutcome{Ref: ref, Status: o.engine.Status, Changed: o.engine.Changed,
			Refreshed: o.engine.Refreshed, Message: clip(o.engine.Message), Error: clip(o.engine.Error), DurationMS: o.durationMS})
		log.Info("offline: task "+string(o.engine.Status), "resource", ref, "message", short(o.engine.Message, 200), "error", o.engine.Error)
	}
	run.FinishedAt = time.Now().UTC()
	// A run that found everything converged is not spooled (as a clean
	// interval check is no run): only what changed something, failed or
	// skipped is reported.
	if run.Stable < run.Total {
		if err := s.spool.add(run, l.a.Name); err != nil {
			log.Error("offline run not spooled: it will not be reported", "error", err)
		}
	}
	s.m.ranOffline(ctx, kind, res)
	log.Info("offline convergence run ended", "trigger", string(kind), "why", why, "changed", len(res.Changed), "failed", len(res.Failed), "total", run.Total)
	s.mu.Lock()
	if s.loops[l.a.Name] == l {
		st := s.status[l.a.Name]
		st.LastRun, st.LastTrigger, st.Offline, st.LastChecked = run.RunID, string(kind), true, run.FinishedAt
		s.status[l.a.Name] = st
	}
	s.mu.Unlock()
	return res
}

type offlineOutcome struct {
	engine     bus.Outcome
	durationMS int64
}

// executeOffline executes one task of a cached plan on this host.
func (s *assigner) executeOffline(ctx context.Context, runID string, task bus.Task, changed, ended map[string]bool, log *slog.Logger) offlineOutcome {
	start := time.Now()
	for _, r := range slices.Concat(task.Resource.Require, task.Resource.AutoRequire) {
		if ended[r] {
			return offlineOutcome{engine: bus.Outcome{Status: bus.TaskSkipped, Message: "skipped: required " + r + " failed or was skipped"}}
		}
	}
	for _, r := range task.Resource.Subscribe {
		if changed[r] {
			task.Refresh = true
		}
	}
	if _, owed := s.w.debts.owes(task); owed && !task.Noop {
		task.Refresh = true
	}
	if task.TimeoutMS > 0 {
		task.Deadline = start.Add(task.Timeout())
	}
	task.RunID = runID
	o := s.w.execute(ctx, task, log.With("resource", task.Resource.Ref()))
	return offlineOutcome{engine: o, durationMS: time.Since(start).Milliseconds()}
}

// selectOffline returns the references an offline run covers: all of
// p's for an empty keys, else keys and, transitively, the resources
// subscribing to them.
func selectOffline(p *plan, keys []string) map[string]bool {
	sel := make(map[string]bool, len(p.Tasks))
	if len(keys) == 0 {
		for _, t := range p.Tasks {
			sel[t.Resource.Ref()] = true
		}
		return sel
	}
	subs := make(map[string][]string, len(p.Tasks))
	for _, t := range p.Tasks {
		subs[t.Resource.Ref()] = t.Subscribers
	}
	queue := slices.Clone(keys)
	for len(queue) > 0 {
		k := queue[0]
		queue = queue[1:]
		if sel[k] {
			continue
		}
		sel[k] = true
		queue = append(queue, subs[k]...)
	}
	return sel
}

func clip(s string) string {
	if len(s) <= bus.MaxOfflineText {
		return s
	}
	return s[:bus.MaxOfflineText-len("…")] + "…"
}

// spool keeps offline runs until they are reported: in memory and, with a
// state directory, one file per run (written atomically and synced). At
// most max runs are kept: past it the oldest is dropped with a warning.
type spool struct {
	dir string // "": memory only
	max int
	log *slog.Logger

	mu   sync.Mutex
	runs []spooled // oldest first
	kick chan struct{}
}

// spooled is an offline run waiting to be reported.
type spooled struct {
	Assignment string         `json:"assignment"`
	Run        bus.OfflineRun `json:"run"`
}

func openSpool(dir string, max int, log *slog.Logger) (*spool, error) {
	sp := &spool{dir: dir, max: max, log: log, kick: make(chan struct{}, 1)}
	if dir == "" {
		return sp, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("offline spool: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("offline spool: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		var r spooled
		if err != nil || json.Unmarshal(b, &r) != nil || r.Run.RunID+".json" != e.Name() {
			log.Warn("offline spool: unreadable run dropped", "file", filepath.Join(dir, e.Name()), "error", err)
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		sp.runs = append(sp.runs, r)
	}
	slices.SortFunc(sp.runs, func(a, b spooled) int { return strings.Compare(a.Run.RunID, b.Run.RunID) })
	sp.trim()
	return sp, nil
}

// add spools a run, dropping the oldest past the bound.
func (sp *spool) add(r bus.OfflineRun, assignment string) error {
	e := spooled{Assignment: assignment, Run: r}
	if sp.dir != "" {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(sp.dir, r.RunID+".json"), b); err != nil {
			return fmt.Errorf("offline spool: %w", err)
		}
	}
	sp.mu.Lock()
	sp.runs = append(sp.runs, e)
	sp.trim()
	sp.mu.Unlock()
	select {
	case sp.kick <- struct{}{}:
	default:
	}
	return nil
}

// trim drops the oldest runs past max; sp.mu is held (or sp is private).
func (sp *spool) trim() {
	for len(sp.runs) > sp.max {
		old := sp.runs[0]
		sp.runs = sp.runs[1:]
		sp.log.Warn("offline spool full: the oldest offline run is dropped unreported", "run_id", old.Run.RunID,
			"assignment", old.Assignment, "trigger", old.Run.Trigger, "bound", sp.max)
		sp.remove(old.Run.RunID)
	}
}

func (sp *spool) remove(runID string) {
	if sp.dir != "" {
		_ = os.Remove(filepath.Join(sp.dir, runID+".json"))
	}
}

// pending returns the spooled runs, oldest first.
func (sp *spool) pending() []spooled {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return slices.Clone(sp.runs)
}

// done forgets a reported (or refused) run.
func (sp *spool) done(runID string) {
	sp.mu.Lock()
	sp.runs = slices.DeleteFunc(sp.runs, func(r spooled) bool { return r.Run.RunID == runID })
	sp.mu.Unlock()
	sp.remove(runID)
}

// count returns how many runs of an assignment are spooled.
func (sp *spool) count(assignment string) int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	n := 0
	for _, r := range sp.runs {
		if r.Assignment == assignment {
			n++
		}
	}
	return n
}

// deliverEvery is how often a worker with spooled runs tries to report
// them (and at once when one is spooled or a run succeeded online).
const deliverEvery = time.Second

// deliver reports the spooled runs whenever the coordinators can be
// reached, oldest first, until ctx ends.
func (s *assigner) deliver(ctx context.Context) {
	t := time.NewTicker(deliverEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.spool.kick:
		}
		runs := s.spool.pending()
		if len(runs) == 0 || s.unreachable() != "" {
			continue
		}
		// The coordinator checks the worker's entry: write it first (it
		// may have expired while the bus was out of reach).
		if err := s.w.register(ctx); err != nil {
			continue
		}
		for _, r := range runs {
			if err := s.report(ctx, r); err != nil {
				var apiErr *bus.APIError
				if errors.As(err, &apiErr) && apiErr.Code != bus.APIUnavailable {
					s.log.Warn("offline run refused by the coordinator; dropped", "run_id", r.Run.RunID, "assignment", r.Assignment, "error", err)
					s.spool.done(r.Run.RunID)
					continue
				}
				if ctx.Err() == nil {
					s.log.Info("offline runs not reported yet; trying again", "pending", len(runs), "error", err)
				}
				break
			}
			s.log.Info("offline run reported", "run_id", r.Run.RunID, "assignment", r.Assignment, "trigger", r.Run.Trigger)
			s.spool.done(r.Run.RunID)
		}
		s.publishSpooled(ctx)
	}
}

// publishSpooled refreshes the spooled counts in the status and publishes.
func (s *assigner) publishSpooled(ctx context.Context) {
	s.mu.Lock()
	for name, st := range s.status {
		st.Spooled = s.spool.count(name)
		s.status[name] = st
	}
	s.mu.Unlock()
	s.publish(ctx)
}

// report sends one spooled run to the coordinators.
func (s *assigner) report(ctx context.Context, r spooled) error {
	req := bus.ConvergeRequest{V: bus.Version, Assignment: r.Assignment, Version: r.Run.AssignmentVersion,
		Trigger: bus.TriggerOffline, Offline: &r.Run}
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	resp, err := s.w.bus.Conn().RequestWithContext(rctx, bus.ConvergeSubject(s.w.cfg.Name), data)
	if err != nil {
		return err
	}
	var rep bus.ConvergeReply
	if err := json.Unmarshal(resp.Data, &rep); err != nil {
		return fmt.Errorf("reply: %w", err)
	}
	if rep.ErrorReply.Error != nil {
		return rep.ErrorReply.Error
	}
	return nil
}

// reportTimeout bounds the report of one offline run.
const reportTimeout = 10 * time.Second

package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/document"
)

// DefaultStateDir is where a worker keeps its cached plans and its spool
// of offline runs: converge beside the refresh debts (under
// $MANIFOLD_STATE_DIR, else /var/lib/manifold for root, else
// $XDG_STATE_HOME/manifold).
func DefaultStateDir() string {
	return filepath.Join(filepath.Dir(document.DefaultStateDir()), "converge")
}

// DefaultPlanCacheMaxBytes is the default of Config.PlanCacheMaxBytes: the
// largest cached plan of one assignment, encoded (64 MiB, about 200,000
// files of small content).
const DefaultPlanCacheMaxBytes = 64 << 20

// plan is the plan a worker executed for one version of an assignment,
// with the facts it rendered it with: the tasks of a full convergence
// run, in the order they ran here (an order that respects every
// requirement, since a task is sent only once its requirements ended).
// It is valid while the assignment's version and the worker's facts
// digest are those it was made with.
type plan struct {
	Assignment string     `json:"assignment"`
	Version    uint64     `json:"version"`
	Facts      string     `json:"facts"`
	RunID      string     `json:"run_id"`
	Manifest   string     `json:"manifest,omitempty"`
	Noop       bool       `json:"noop,omitempty"`
	At         time.Time  `json:"at"`
	Tasks      []bus.Task `json:"tasks"`

	size  int         // encoded bytes
	once  sync.Once   // builds items
	items []checkItem // the built resources, for checks
}

// refs returns the plan's resource references, in order.
func (p *plan) refs() []string {
	out := make([]string, len(p.Tasks))
	for i, t := range p.Tasks {
		out[i] = t.Resource.Ref()
	}
	return out
}

// factsDigest is the digest a plan is valid for: the SHA-256 of the facts'
// JSON (keys sorted).
func factsDigest(facts map[string]any) string {
	b, _ := json.Marshal(facts)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// collecting gathers the tasks of one convergence run as they arrive.
type collecting struct {
	seq   int
	tasks map[int]collected // by task index
	size  int
	over  bool // past the bound: not cached
}

type collected struct {
	seq  int
	task bus.Task
}

// maxCollecting bounds the runs whose tasks a loop gathers at once (the
// run in progress, and runs abandoned by a coordinator that died).
const maxCollecting = 4

// collect keeps a task of an assignment's convergence run pinned to this
// worker, for the plan cache; the run's reply (assignRunner.Converge)
// decides whether the run's tasks make a complete plan.
func (s *assigner) collect(task bus.Task) {
	l := s.loop(task)
	if l == nil || strings.Contains(task.RunID, offlineMark) { // an offline run's: the plan itself
		return
	}
	t := task
	// What is specific to this delivery is not part of the plan.
	t.Token, t.Deadline, t.Segment, t.SegmentTokens, t.Ref, t.Resumed, t.Refresh = "", time.Time{}, nil, nil, "", false, false
	b, err := json.Marshal(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.collecting[task.RunID]
	if c == nil {
		if len(l.collecting) >= maxCollecting {
			clear(l.collecting) // abandoned runs: the new one counts
		}
		c = &collecting{tasks: map[int]collected{}}
		l.collecting[task.RunID] = c
	}
	if c.over {
		return
	}
	if err != nil || c.size+len(b) > s.planMax {
		c.over, c.tasks = true, nil
		return
	}
	if old, ok := c.tasks[task.Task]; ok { // a retry: it keeps its place
		c.tasks[task.Task] = collected{seq: old.seq, task: t}
		return
	}
	c.seq++
	c.size += len(b)
	c.tasks[task.Task] = collected{seq: c.seq, task: t}
}

// commit makes the tasks gathered for runID the loop's plan when they are
// all of the run's total resources, and stores it, valid for facts (the
// digest of the facts the run was compiled with). It returns why not
// otherwise ("" when cached).
func (s *assigner) commit(ctx context.Context, l *assignLoop, runID string, total int, facts string) string {
	l.mu.Lock()
	c := l.collecting[runID]
	delete(l.collecting, runID)
	l.mu.Unlock()
	switch {
	case c == nil:
		return "no task of the run reached this worker"
	case c.over:
		return fmt.Sprintf("the plan is over the cache's bound of %d bytes", s.planMax)
	case total == 0 || len(c.tasks) != total:
		return fmt.Sprintf("this worker executed %d of the run's %d resources (apply resources run elsewhere; skipped ones never reach it)", len(c.tasks), total)
	}
	list := make([]collected, 0, len(c.tasks))
	for _, t := range c.tasks {
		list = append(list, t)
	}
	slices.SortFunc(list, func(a, b collected) int { return a.seq - b.seq })
	if facts == "" {
		return "the worker's facts were not published before the run"
	}
	// At to the second: a plan's size depends on its tasks only.
	p := &plan{Assignment: l.a.Name, Version: l.a.Version, Facts: facts, RunID: runID,
		Manifest: list[0].task.Manifest, Noop: l.a.Noop, At: time.Now().UTC().Truncate(time.Second), Tasks: make([]bus.Task, len(list))}
	for i, t := range list {
		p.Tasks[i] = t.task
	}
	data, err := json.Marshal(p)
	if err != nil {
		return err.Error()
	}
	if len(data) > s.planMax {
		return fmt.Sprintf("the plan is %d bytes, over the cache's bound of %d bytes", len(data), s.planMax)
	}
	p.size = len(data)
	if s.plans != "" {
		if err := writeFileAtomic(s.planPath(l.a.Name), data); err != nil {
			s.log.Warn("plan cached in memory only", "assignment", l.a.Name, "error", err)
		}
	}
	l.mu.Lock()
	l.plan = p
	l.mu.Unlock()
	return ""
}

// currentPlan returns the loop's plan when it is valid for the
// assignment's version and the worker's facts now.
func (s *assigner) currentPlan(l *assignLoop) *plan {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.plan
	if p == nil {
		return nil
	}
	if p.Version != l.a.Version || p.Facts != factsDigest(s.w.facts()) {
		l.plan = nil // facts changed: a full run makes a new one
		return nil
	}
	return p
}

func (s *assigner) planPath(name string) string { return filepath.Join(s.plans, name+".json") }

// loadPlan reads the stored plan of a, when it is for a's version and the
// worker's facts; a stale one is removed.
func (s *assigner) loadPlan(a bus.Assignment) *plan {
	if s.plans == "" {
		return nil
	}
	path := s.planPath(a.Name)
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if fi.Size() > int64(s.planMax) {
		s.log.Warn("stored plan ignored: over the cache's bound", "assignment", a.Name, "bytes", fi.Size(), "bound", s.planMax)
		_ = os.Remove(path)
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var p plan
	if err := json.Unmarshal(data, &p); err != nil || p.Assignment != a.Name {
		s.log.Warn("stored plan ignored: unreadable", "assignment", a.Name, "path", path, "error", err)
		_ = os.Remove(path)
		return nil
	}
	if p.Version != a.Version || p.Facts != factsDigest(s.w.facts()) {
		_ = os.Remove(path) // another version, or other facts
		return nil
	}
	p.size = len(data)
	return &p
}

// dropPlan forgets the stored plan of an assignment no longer kept here.
func (s *assigner) dropPlan(name string) {
	if s.plans != "" {
		if err := os.Remove(s.planPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("stored plan not removed", "assignment", name, "error", err)
		}
	}
}

// checkItem is one resource of a plan, built for checks.
type checkItem struct {
	task bus.Task
	ref  string
	res  resources.Resource
	env  *resources.Env
	// skip: its control guard is false (nothing to check); err: it could
	// not be built (its repair run reports why).
	skip bool
	err  error
}

// build renders and builds every resource of p once (the check loop then
// costs only the checks).
func (s *assigner) build(ctx context.Context, p *plan) []checkItem {
	p.once.Do(func() {
		log := s.log.With("assignment", p.Assignment)
		p.items = make([]checkItem, len(p.Tasks))
		for i, t := range p.Tasks {
			it := checkItem{task: t, ref: t.Resource.Ref()}
			dir, _, err := s.w.workDir(ctx, t)
			if err != nil {
				it.err = err
			} else {
				res, env, early := s.w.prepare(t, dir, log)
				switch {
				case early != nil && early.Status == bus.TaskSkipped:
					it.skip = true
				case early != nil:
					it.err = errors.New(early.Error)
				default:
					env.Noop, env.HealthChecks = false, nil
					it.res, it.env = res, env
				}
			}
			p.items[i] = it
		}
	})
	return p.items
}

// writeFileAtomic writes data to path through a synced temporary file and
// a rename (mode 0600).
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	return err
}

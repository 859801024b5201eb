package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/manifold-run/manifold/bus"
)

// DistResult is the distributed figures: throughput of trivial tasks by
// worker count, and per-task latency.
type DistResult struct {
	// N is the number of tasks of a throughput run; Reps the runs per
	// worker count.
	N, Reps int
	// Concurrency is each worker's default concurrency (the CPUs).
	Concurrency int
	// First is the run time of the first run (every file created), with one
	// worker.
	First time.Duration
	Rows  []DistRow
	// Latency is measured on a run in declaration order.
	Latency *Latency
	Err     error
}

// DistRow is the throughput with a number of workers.
type DistRow struct {
	Workers int
	// RunTime is the median run time (report's finished_at - started_at).
	RunTime time.Duration
	// Wall is the median wall time of the `manifold run` client process.
	Wall        time.Duration
	TasksPerSec float64
	Err         error
}

// Latency is the per-task time a run spends outside the resource's own
// execution.
type Latency struct {
	// ChainN is the number of resources of the run in declaration order
	// (one task in flight at a time: not saturated), Runs the runs.
	ChainN, Runs int
	// Tasks is how many task samples the percentiles are over.
	Tasks int
	// P50 and P99 are percentiles, over every task of every run, of the
	// time from the coordinator's task_dispatched event to its
	// task_finished event, minus the resource's duration_ms as the worker
	// measured it.
	P50, P99 time.Duration
	// PerTask is the median over runs of run time / ChainN: the whole
	// round trip per resource, decisions included.
	PerTask time.Duration
	// OneResource is the median, over runs of a one-resource manifest, of
	// the run time minus the resource's duration.
	OneResource time.Duration
	// Floor is the bare JetStream round trip on the same server (busFloor).
	Floor *BusFloor
	Err   error
}

// runDist starts a cluster of separate processes and measures latency
// (with one worker), then throughput with each worker count.
func (h *harness) runDist(ctx context.Context) (*DistResult, error) {
	cfg := h.cfg
	res := &DistResult{N: cfg.DistN, Reps: cfg.Reps, Concurrency: runtime.NumCPU()}
	dir := filepath.Join(h.work, "dist")
	c, err := h.startCluster(ctx, dir)
	if err != nil {
		res.Err = err
		return res, err
	}
	defer c.stop()
	events, unsubscribe, err := c.collectEvents()
	if err != nil {
		res.Err = err
		return res, err
	}
	defer unsubscribe()
	workers := slices.Sorted(slices.Values(cfg.Workers))
	if err := c.addWorkers(ctx, workers[0]); err != nil {
		res.Err = err
		return res, err
	}
	res.Latency = c.latency(ctx, events)
	if res.Latency.Err != nil {
		h.log.Warn("latency failed", "error", res.Latency.Err)
	}
	res.Latency.Floor = c.busFloor(ctx, max(res.Latency.Tasks, floorWarmup))
	if res.Latency.Floor.Err != nil {
		h.log.Warn("bus floor failed", "error", res.Latency.Floor.Err)
	}
	// The throughput runs have no observer of their events: the
	// subscription, and the harness decoding every event on the same
	// cores, would be measured with them (4,000 events a run).
	unsubscribe()

	spec := filesSpec{dir: filepath.Join(dir, "graph"), n: cfg.DistN, owner: h.id.owner, group: h.id.group, ordering: OrderingGraph}
	m, err := c.manifest(spec, "graph.yaml")
	if err != nil {
		res.Err = err
		return res, err
	}
	r, _, err := c.submit(ctx, m, spec.n, spec.n)
	if err != nil {
		res.Err = fmt.Errorf("first run: %w", err)
		return res, res.Err
	}
	res.First = r.runTime()
	for _, k := range workers {
		row := DistRow{Workers: k}
		if err := c.addWorkers(ctx, k); err != nil {
			row.Err = err
			res.Rows = append(res.Rows, row)
			break
		}
		var runs, walls []time.Duration
		for range cfg.Reps {
			r, wall, err := c.submit(ctx, m, spec.n, 0)
			if err != nil {
				row.Err = err
				break
			}
			runs, walls = append(runs, r.runTime()), append(walls, wall)
		}
		row.RunTime, row.Wall = median(runs), median(walls)
		if row.RunTime > 0 {
			row.TasksPerSec = float64(spec.n) / row.RunTime.Seconds()
		}
		h.log.Info("throughput", "workers", k, "tasks", spec.n, "run_time", row.RunTime, "tasks_per_s", int(row.TasksPerSec), "error", row.Err)
		res.Rows = append(res.Rows, row)
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// manifest creates spec's directory and writes its manifest into the
// cluster's directory.
func (c *cluster) manifest(spec filesSpec, name string) (string, error) {
	if err := c.h.mkdirs(spec.dir); err != nil {
		return "", err
	}
	m := filepath.Join(c.dir, name)
	return m, spec.write(m)
}

// submit runs `manifold run --output json` (submit, wait, print the
// report) and checks the report: every one of total resources succeeded,
// changed of them changed.
func (c *cluster) submit(ctx context.Context, m string, total, changed int) (*runReport, time.Duration, error) {
	timeout := c.h.cfg.timeoutFor(total)
	s := c.h.run.run(ctx, timeout+10*time.Second, filepath.Dir(m), c.h.manifold,
		"run", "--server", c.url, "--output", "json", "--timeout", timeout.String(), m)
	if s.err != nil {
		return nil, 0, s.err
	}
	r, err := parseReport(s.stdout)
	if err != nil {
		return nil, 0, err
	}
	if r.Counts.Total != total || r.Counts.Changed != changed {
		return nil, 0, fmt.Errorf("run %s: %d resources, %d changed; want %d, %d", r.RunID, r.Counts.Total, r.Counts.Changed, total, changed)
	}
	return r, s.wall, nil
}

// eventLog collects the events of every run, as a follower would see them.
type eventLog struct {
	mu       sync.Mutex
	events   []bus.Event
	finished map[string]chan struct{}
}

// collectEvents subscribes to every run's events with core NATS.
func (c *cluster) collectEvents() (*eventLog, func(), error) {
	l := &eventLog{finished: map[string]chan struct{}{}}
	sub, err := c.nc.Subscribe(bus.SubjectEventsAll, func(msg *nats.Msg) {
		var ev bus.Event
		if json.Unmarshal(msg.Data, &ev) != nil {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.events = append(l.events, ev)
		if ev.Kind == bus.EventRunFinished {
			close(l.done(ev.RunID))
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("bench: subscribe to events: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	if err := c.nc.Flush(); err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	return l, func() { _ = sub.Unsubscribe() }, nil
}

// done returns the channel closed when run's run_finished event arrives;
// the caller holds l.mu.
func (l *eventLog) done(run string) chan struct{} {
	ch, ok := l.finished[run]
	if !ok {
		ch = make(chan struct{})
		l.finished[run] = ch
	}
	return ch
}

// overheads waits for run's run_finished event and returns, per task,
// task_finished - task_dispatched - duration_ms.
func (l *eventLog) overheads(ctx context.Context, run string) ([]time.Duration, error) {
	l.mu.Lock()
	ch := l.done(run)
	l.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		return nil, fmt.Errorf("no run_finished event of run %s within 10s (timeout)", run)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	dispatched := map[int]time.Time{}
	var out []time.Duration
	for _, ev := range l.events {
		if ev.RunID != run || ev.Task == nil {
			continue
		}
		switch ev.Kind {
		case bus.EventTaskDispatched:
			if _, ok := dispatched[*ev.Task]; !ok {
				dispatched[*ev.Task] = ev.Time
			}
		case bus.EventTaskFinished:
			if t, ok := dispatched[*ev.Task]; ok {
				out = append(out, ev.Time.Sub(t)-time.Duration(ev.DurationMS)*time.Millisecond)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("run %s: no task_dispatched/task_finished event pairs", run)
	}
	return out, nil
}

// latency measures per-task latency with the cluster's workers: a run in
// declaration order of ChainN stable files (one task in flight at a time),
// and a one-resource run.
func (c *cluster) latency(ctx context.Context, events *eventLog) *Latency {
	cfg := c.h.cfg
	lat := &Latency{ChainN: cfg.ChainN, Runs: cfg.Reps}
	// Each resource requires the one before: a task of its own (no
	// segment), one in flight at a time.
	chain := filesSpec{dir: filepath.Join(c.dir, "chain"), n: cfg.ChainN, owner: c.h.id.owner, group: c.h.id.group, ordering: OrderingGraph, chain: true}
	one := filesSpec{dir: filepath.Join(c.dir, "one"), n: 1, owner: c.h.id.owner, group: c.h.id.group}
	mChain, err := c.manifest(chain, "chain.yaml")
	if err == nil {
		_, err = os.Stat(mChain)
	}
	if err != nil {
		lat.Err = err
		return lat
	}
	mOne, err := c.manifest(one, "one.yaml")
	if err != nil {
		lat.Err = err
		return lat
	}
	// First runs create the files; the measured runs are converged.
	for _, w := range []struct {
		m string
		n int
	}{{mChain, chain.n}, {mOne, 1}} {
		if _, _, err := c.submit(ctx, w.m, w.n, w.n); err != nil {
			lat.Err = fmt.Errorf("first run: %w", err)
			return lat
		}
	}
	var all, perTask, oneRes []time.Duration
	for range cfg.Reps {
		r, _, err := c.submit(ctx, mChain, chain.n, 0)
		if err != nil {
			lat.Err = err
			return lat
		}
		perTask = append(perTask, r.runTime()/time.Duration(chain.n))
		ov, err := events.overheads(ctx, r.RunID)
		if err != nil {
			lat.Err = err
			return lat
		}
		all = append(all, ov...)
		r, _, err = c.submit(ctx, mOne, 1, 0)
		if err != nil {
			lat.Err = err
			return lat
		}
		d := r.runTime()
		if len(r.Resources) == 1 {
			d -= time.Duration(r.Resources[0].DurationMS) * time.Millisecond
		}
		oneRes = append(oneRes, d)
	}
	lat.Tasks = len(all)
	lat.P50, lat.P99 = percentile(all, 50), percentile(all, 99)
	lat.PerTask, lat.OneResource = median(perTask), median(oneRes)
	c.h.log.Info("latency", "p50", lat.P50, "p99", lat.P99, "per_task", lat.PerTask, "one_resource", lat.OneResource)
	return lat
}

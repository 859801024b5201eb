package coordinator

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/bus"
)

// Defaults of Config.
const (
	DefaultMaxDepth = 10
	// DefaultMaxTreeRuns is the default of Config.MaxTreeRuns.
	DefaultMaxTreeRuns = 1000
	// DefaultMaxDepthLimit is the default of Config.MaxDepthLimit.
	DefaultMaxDepthLimit = 50
	// DefaultMaxTreeRunsLimit is the default of Config.MaxTreeRunsLimit.
	DefaultMaxTreeRunsLimit = 10000
	// DefaultMaxTreeLiveRuns is the default of Config.MaxTreeLiveRuns.
	DefaultMaxTreeLiveRuns = 64
	DefaultTaskTimeout     = 10 * time.Minute
	// DefaultLease is the default of Config.Lease.
	DefaultLease = 10 * time.Second
	// DefaultOutcomeGrace is the default of Config.OutcomeGrace.
	DefaultOutcomeGrace = 5 * time.Second
)

// Config configures a Coordinator.
type Config struct {
	// Bus is the provisioned bus. Required.
	Bus *bus.Bus
	// Name identifies this coordinator in run records and logs. Defaults to
	// host-pid.
	Name string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MaxDepth is the maximum nesting of apply runs unless a run request
	// sets its own. Defaults to 10.
	MaxDepth int
	// MaxTreeRuns caps the child runs one run tree starts, at every depth
	// together (an apply fanning out at each level grows geometrically
	// within the depth limit), unless a run request sets its own.
	// Defaults to 1000.
	MaxTreeRuns int
	// MaxDepthLimit is the policy on MaxDepth: the largest max_depth a run
	// request may ask for; a request asking more is rejected. MaxDepth
	// must not exceed it. Defaults to 50.
	MaxDepthLimit int
	// MaxTreeRunsLimit is the policy on MaxTreeRuns: the largest
	// max_tree_runs a run request may ask for; a request asking more is
	// rejected. MaxTreeRuns must not exceed it. Defaults to 10,000.
	MaxTreeRunsLimit int
	// MaxTreeLiveRuns bounds the child runs of one run tree this
	// coordinator drives at once. A child run beyond it waits (its apply
	// resource stays dispatched) until another child run of the tree
	// ends, unless its parent has no child run in progress: that one
	// always starts, so a chain of applies never waits on itself.
	// Defaults to 64.
	MaxTreeLiveRuns int
	// TaskTimeout bounds a task (queue wait plus execution) whose resource
	// and request set none. Defaults to 10m.
	TaskTimeout time.Duration
	// OutcomeGrace is how long after a task's deadline the coordinator
	// still waits for the worker's own timeout outcome before failing the
	// task itself. Defaults to 5s.
	OutcomeGrace time.Duration
	// TracerProvider defaults to otel's global provider.
	TracerProvider trace.TracerProvider
	// MeterProvider defaults to otel's global provider.
	MeterProvider metric.MeterProvider
	// Lease is how long a coordinator's claim on a run lasts without
	// renewal; the owner renews it at a third of that. When it lapses (the
	// owner died) another coordinator resumes the run. Defaults to 10s.
	Lease time.Duration
	// Compiled, when set, returns the plan the submitter of a root run
	// compiled for it, so that the manifest is parsed and compiled once
	// per process: the embedded engine of `manifold apply`, whose CLI
	// compiled and validated the whole tree before submitting, with the
	// same inputs (bundle, data, facts). It is asked when the run starts;
	// a run resumed or without an entry is compiled from its bundle.
	Compiled func(runID string) (*Plan, bool)
	// Finished, when set, is given the report of each run this
	// coordinator finishes, once the report is final and before it is
	// stored (and so before the run's run_finished event): rep as it is
	// stored (child runs' reports not nested: GetReport nests them) and
	// data, the bytes stored. Neither may be modified, and it must not
	// block. The embedded engine of `manifold apply` prints its run's
	// report from here rather than reading back and decoding what was
	// just stored, with --output json while it is stored (its store is
	// its own, gone with the process). kept says the caller keeps the
	// report and is its only reader: it is then not stored (the run's
	// header and run_finished event are written as ever).
	Finished func(runID string, rep *Report, data []byte) (kept bool)
	// EventsRead, when set, returns the kinds of progress event anyone
	// can read of the run tree rootRunID, nil for every kind; a
	// resource's task_dispatched and task_finished events of a kind not
	// among them are not published (run events always are). It is asked
	// once per run. The embedded engine of `manifold apply` sets it: its
	// server has no listener, so its CLI is the only reader, and with
	// --output json it reads only the run's end (two stored events per
	// resource were a fifth of a converged 20,000-file apply's run).
	EventsRead func(rootRunID string) []bus.EventKind
	// Unsigned starts runs without a secret: their tasks carry no token,
	// their outcomes no MAC, and their history is applied as it is read
	// (a run of an earlier version's coordinator is so). Only for a bus
	// no one else can publish to: the embedded engine's private server,
	// which has no listener. Its three MACs per resource were 3 % of a
	// converged 2,000-file apply's CPU. Its run requests are this
	// binary's own encoding, so they are not decoded strictly a second
	// time (a field this coordinator does not know cannot be in them):
	// the strict decode's token scan of the request's facts was 0.3 ms
	// of the embedded engine's path.
	Unsigned bool
	// ScanInterval is how often a coordinator looks for runs to resume.
	// Defaults to a fifth of Lease, at most a second: a run handed off by
	// a stopping coordinator is resumed within it.
	ScanInterval time.Duration
	// FoldEventsGrace is how long after a fan-out ended, at the latest,
	// the progress events of its folded child runs are purged (fold.go):
	// a follower still reading the run tree's events gets them
	// meanwhile. Defaults to 30s.
	FoldEventsGrace time.Duration
	// FoldEventsSettle is how long after a root fan-out ended its tree's
	// events are kept whatever their readers; after it they are purged
	// as soon as no consumer of the events stream has some of them left
	// to be sent (looked at every FoldEventsSettle, at most every
	// second), FoldEventsGrace at the latest. Defaults to
	// FoldEventsGrace (no earlier purge: fold.go says why); at most
	// FoldEventsGrace.
	FoldEventsSettle time.Duration
	// MaxReports bounds the reports store: past it the oldest reports are
	// removed, with their runs' records (retention.go). Defaults to
	// 50,000; negative: no bound.
	MaxReports int
	// ReportsMaxAge removes the reports (and run records) older than it.
	// Defaults to 30 days; negative: no bound.
	ReportsMaxAge time.Duration
	// ReportsMaxBytes bounds the reports store's size: past it the
	// oldest reports (and their run records) are removed, the last one
	// left never. Defaults to 10 GiB; negative: no bound.
	ReportsMaxBytes int64
	// PruneInterval is how often, at most, the reports store is pruned
	// to those bounds, after a root run ended (the first time a
	// PruneInterval after Start: a one-run embedded engine never prunes).
	// Defaults to 1m.
	PruneInterval time.Duration
}

// WithDefaults returns cfg with zero fields set to their defaults.
func (cfg Config) WithDefaults() Config {
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = cmp.Or(host, "coordinator") + "-" + strconv.Itoa(os.Getpid())
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.MaxDepth = cmp.Or(cfg.MaxDepth, DefaultMaxDepth)
	cfg.MaxTreeRuns = cmp.Or(cfg.MaxTreeRuns, DefaultMaxTreeRuns)
	cfg.MaxDepthLimit = cmp.Or(cfg.MaxDepthLimit, DefaultMaxDepthLimit)
	cfg.MaxTreeRunsLimit = cmp.Or(cfg.MaxTreeRunsLimit, DefaultMaxTreeRunsLimit)
	cfg.MaxTreeLiveRuns = cmp.Or(cfg.MaxTreeLiveRuns, DefaultMaxTreeLiveRuns)
	cfg.TaskTimeout = cmp.Or(cfg.TaskTimeout, DefaultTaskTimeout)
	cfg.OutcomeGrace = cmp.Or(cfg.OutcomeGrace, DefaultOutcomeGrace)
	cfg.Lease = cmp.Or(cfg.Lease, DefaultLease)
	cfg.ScanInterval = cmp.Or(cfg.ScanInterval, min(cfg.Lease/5, time.Second))
	cfg.FoldEventsGrace = cmp.Or(cfg.FoldEventsGrace, DefaultFoldEventsGrace)
	cfg.FoldEventsSettle = min(cmp.Or(cfg.FoldEventsSettle, DefaultFoldEventsSettle), cfg.FoldEventsGrace)
	cfg.MaxReports = cmp.Or(cfg.MaxReports, DefaultMaxReports)
	cfg.ReportsMaxAge = cmp.Or(cfg.ReportsMaxAge, DefaultReportsMaxAge)
	cfg.ReportsMaxBytes = cmp.Or(cfg.ReportsMaxBytes, DefaultReportsMaxBytes)
	cfg.PruneInterval = cmp.Or(cfg.PruneInterval, time.Minute)
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otel.GetMeterProvider()
	}
	return cfg
}

func (cfg Config) validate() error {
	if cfg.Bus == nil {
		return errors.New("coordinator: config needs a bus")
	}
	if cfg.MaxDepth < 0 {
		return fmt.Errorf("coordinator: max depth %d is negative", cfg.MaxDepth)
	}
	if cfg.MaxTreeRuns < 0 {
		return fmt.Errorf("coordinator: max tree runs %d is negative", cfg.MaxTreeRuns)
	}
	if cfg.MaxTreeLiveRuns < 0 {
		return fmt.Errorf("coordinator: max tree live runs %d is negative", cfg.MaxTreeLiveRuns)
	}
	if cfg.MaxDepth > cfg.MaxDepthLimit {
		return fmt.Errorf("coordinator: max depth %d is over the max depth limit %d", cfg.MaxDepth, cfg.MaxDepthLimit)
	}
	if cfg.MaxTreeRuns > cfg.MaxTreeRunsLimit {
		return fmt.Errorf("coordinator: max tree runs %d is over the max tree runs limit %d", cfg.MaxTreeRuns, cfg.MaxTreeRunsLimit)
	}
	return nil
}

// Coordinator takes run requests from the bus and drives them to the end.
// Any number of coordinators may share a bus: each run request goes to one.
type Coordinator struct {
	cfg    Config
	bus    *bus.Bus
	log    *slog.Logger
	tracer trace.Tracer

	metrics   *metrics
	bundles   bundleCache
	driving   driving
	orphans   orphanKeys // recovery.go
	histories *bus.Histories
	trees     treeSlots
	folds     foldStash // fan-out children's reports (fold.go)
	prune     pruner    // retention.go

	slotsMu sync.Mutex
	slots   map[string]slotCount // by pool (spreadOf)

	mu      sync.Mutex
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped bool
}

// New returns a coordinator; Start starts it.
func New(cfg Config) (*Coordinator, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.MeterProvider, cfg.Bus)
	if err != nil {
		return nil, fmt.Errorf("coordinator: metrics: %w", err)
	}
	return &Coordinator{
		metrics: m,
		cfg:     cfg,
		bus:     cfg.Bus,
		log:     cfg.Logger.With("component", "coordinator", "coordinator", cfg.Name),
		tracer:  cfg.TracerProvider.Tracer("github.com/manifold-run/manifold/coordinator"),
	}, nil
}

// Start binds to the run request consumer and returns; runs are taken and
// driven in the background until Stop or until ctx ends.
func (c *Coordinator) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil || c.stopped {
		return errors.New("coordinator: already started")
	}
	cons, err := c.bus.RunRequestConsumer(ctx)
	if err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	// One consumer reads the histories of every run driven here.
	c.histories = c.bus.NewHistories(func(read, newest uint64) {
		c.log.Warn("history reader stalled; reading again on a new consumer", "read", read, "newest", newest)
	})
	if err := c.histories.Start(ctx); err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopAPI, err := c.startAPI(ctx) // the micro service `manifold` (api.go)
	if err != nil {
		cancel()
		c.histories.Stop()
		return fmt.Errorf("coordinator: %w", err)
	}
	// A run cancelled by any coordinator's API wakes its loop here, so it
	// stops at once rather than at its next outcome.
	stopCancels, err := c.bus.SubscribeCancels(c.driving.wake)
	if err != nil {
		cancel()
		stopAPI()
		c.histories.Stop()
		return fmt.Errorf("coordinator: %w", err)
	}
	c.cancel = cancel
	c.prune.reset(time.Now())
	c.wg.Go(func() { c.intake(ctx, cons) })
	c.wg.Go(func() { c.recoverLoop(ctx) })
	c.wg.Go(func() { <-ctx.Done(); stopAPI(); stopCancels() })
	return nil
}

// Stop stops taking runs and stops driving the runs in progress (their
// state is in the runs bucket; another coordinator can resume them). It
// blocks until every goroutine has ended; it is idempotent and safe when
// never started.
func (c *Coordinator) Stop() {
	c.mu.Lock()
	c.stopped = true
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	c.wg.Wait()
	if cancel != nil {
		c.histories.Stop()
	}
}

func (c *Coordinator) intake(ctx context.Context, cons *bus.Consumer) {
	for {
		d, err := cons.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Error("run requests: consumer stopped", "error", err)
			}
			return
		}
		var req bus.RunRequest
		if err := bus.Decode(d.Data(), &req); err != nil {
			c.log.Warn("run request dropped: unreadable", "error", err)
			_ = d.Term(err.Error())
			continue
		}
		// Not on a private bus (Config.Unsigned): no one else publishes
		// there.
		if !c.cfg.Unsigned {
			if err := bus.DecodeStrict(d.Data(), &bus.RunRequest{}); err != nil {
				// A field this coordinator does not know (a misspelt "noop")
				// would be silently ignored: the run is rejected instead.
				rec := &record{V: 1, RunID: req.RunID, RootRunID: req.RunID, Request: req, Status: RunQueued,
					Manifest: cmp.Or(req.ManifestName, "manifest.yaml"), QueuedAt: time.Now().UTC(), Owner: c.cfg.Name}
				_ = c.reject(ctx, rec, fmt.Errorf("run request: %w", err))
				_ = d.Term(err.Error())
				continue
			}
		}
		if err := c.accept(ctx, d.Ctx, req, nil); err != nil {
			c.log.Error("run request: could not accept, will be redelivered", "error", err)
			_ = d.Nak(time.Second)
			continue
		}
		if err := d.Ack(ctx); err != nil {
			c.log.Warn("run request: ack failed (a redelivery is recognised as a duplicate)", "error", err)
		}
	}
}

// childOf links a child run to its parent.
type childOf struct {
	parent    *record
	task      int
	attempt   int
	depth     int
	maxDepth  int
	name      string
	chain     []string
	applyData map[string]any
	denyApply bool
	session   map[string]sessionRef
	// sessionRef names the stored session when it is too large for the
	// header (session is then nil).
	sessionRef string
	// slotHeld says the caller took the child's slot of the tree's live
	// runs (treeSlots); accept takes one otherwise. Either way it is
	// given back when the child run's driving ends here.
	slotHeld bool
}

// accept records a new run (queued) and starts driving it. A request whose
// run ID or idempotency key was seen before starts nothing.
func (c *Coordinator) accept(ctx, traceCtx context.Context, req bus.RunRequest, parent *childOf) error {
	return c.acceptPrepared(ctx, traceCtx, req, parent, nil)
}

// acceptPrepared is accept with the plan of a root run its submission was
// checked with (api.submit), which the run then starts from instead of
// compiling the manifest a second time; nil: none.
func (c *Coordinator) acceptPrepared(ctx, traceCtx context.Context, req bus.RunRequest, parent *childOf, prepared *Plan) error {
	started := false
	if parent != nil {
		root := rootOf(parent.parent)
		if !parent.slotHeld {
			c.trees.acquire(root, 0, true)
		}
		defer func() {
			if !started {
				c.trees.release(root)
			}
		}()
	}
	if req.RunID == "" {
		req.RunID = NewRunID()
	}
	rec := &record{
		V: 1, RunID: req.RunID, RootRunID: req.RunID, Request: req, Status: RunQueued,
		Manifest: cmp.Or(req.ManifestName, "manifest.yaml"), QueuedAt: time.Now().UTC(), Owner: c.cfg.Name,
	}
	rec.Request.Pool = cmp.Or(rec.Request.Pool, bus.DefaultPool)
	// A where fans the run out over the matching workers (fanout.go).
	rec.Request.EachWorker = rec.Request.EachWorker || req.Where != ""
	if parent != nil {
		rec.RootRunID, rec.ParentRunID, rec.ParentTask, rec.Depth = parent.parent.RootRunID, parent.parent.RunID, parent.task, parent.depth
		rec.ParentAttempt, rec.Chain, rec.ApplyData, rec.DenyApply = parent.attempt, parent.chain, parent.applyData, parent.denyApply
		rec.ParentNoop = parent.parent.Request.Noop
		rec.Session, rec.SessionRef, rec.MaxDepth, rec.Entry = parent.session, parent.sessionRef, parent.maxDepth, req.Entry
		rec.Manifest = parent.name
	}
	if err := bus.ValidToken(req.RunID); err != nil {
		return c.reject(ctx, rec, fmt.Errorf("run_id: %w", err))
	}
	if err := bus.ValidToken(rec.Request.Pool); err != nil {
		return c.reject(ctx, rec, fmt.Errorf("pool: %w", err))
	}
	if req.PinWorker != "" {
		if err := bus.ValidToken(bus.PinnedPool(req.PinWorker)); err != nil {
			return c.reject(ctx, rec, fmt.Errorf("pin_worker: %w", err))
		}
	}
	if req.Offline || req.ReportedBy != "" {
		return c.reject(ctx, rec, errors.New("offline and reported_by are set by coordinators only (offline runs a worker reports)"))
	}
	if parent == nil {
		if err := c.checkPolicy(req); err != nil {
			return c.reject(ctx, rec, err)
		}
	}
	if req.IdempotencyKey != "" {
		_, err := c.bus.Runs().Create(ctx, idempotencyKey(req.IdempotencyKey), []byte(req.RunID))
		if errors.Is(err, bus.ErrExists) {
			c.log.Info("run request: idempotency key seen before, not started again", "run_id", req.RunID)
			return nil
		} else if err != nil {
			return err
		}
	}
	if !c.cfg.Unsigned {
		if err := newSecret(rec, parent); err != nil {
			return err
		}
	}
	rec.LeaseUntil = time.Now().Add(c.cfg.Lease).UTC()
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := c.bus.Runs().Put(ctx, activeKey(rec.RunID), nil); err != nil {
		return err
	}
	rev, err := c.bus.Runs().Create(ctx, runKey(rec.RunID), data)
	if errors.Is(err, bus.ErrExists) {
		c.log.Info("run request: run exists, not started again", "run_id", req.RunID)
		return nil
	} else if err != nil {
		return err
	}
	c.event(ctx, rec, bus.Event{Kind: bus.EventRunQueued})
	r := &run{c: c, rec: rec, rev: rev, log: c.log.With("run_id", rec.RunID, "manifest", rec.Manifest)}
	if parent == nil {
		r.prepared = prepared
	}
	if parent != nil {
		r.log = r.log.With("root_run_id", rec.RootRunID, "parent_run_id", rec.ParentRunID)
	}
	if !c.driving.claim(rec.RunID) {
		return nil
	}
	started = true
	c.wg.Go(func() {
		defer c.driving.release(rec.RunID)
		if parent != nil {
			defer c.trees.release(rootOf(rec))
		}
		r.drive(ctx, traceCtx, false)
	})
	return nil
}

// ErrPolicy: a run request asks for more than the coordinator's policy
// allows (Config.MaxDepthLimit, Config.MaxTreeRunsLimit).
var ErrPolicy = errors.New("run request exceeds this coordinator's policy")

// checkPolicy rejects a root run request asking for limits above the
// coordinator's policy: the submitter may lower them, never raise them
// past what the operator allows.
func (c *Coordinator) checkPolicy(req bus.RunRequest) error {
	if req.MaxDepth < 0 || req.MaxTreeRuns < 0 {
		return fmt.Errorf("%w: max_depth and max_tree_runs must not be negative", ErrPolicy)
	}
	if req.MaxDepth > c.cfg.MaxDepthLimit {
		return fmt.Errorf("%w: max_depth %d is over the limit of %d (coordinator --max-depth-limit)", ErrPolicy, req.MaxDepth, c.cfg.MaxDepthLimit)
	}
	if req.MaxTreeRuns > c.cfg.MaxTreeRunsLimit {
		return fmt.Errorf("%w: max_tree_runs %d is over the limit of %d (coordinator --max-tree-runs-limit)", ErrPolicy, req.MaxTreeRuns, c.cfg.MaxTreeRunsLimit)
	}
	return nil
}

// reject ends a run that cannot start, recording why, when it has a usable
// run ID; otherwise it only reports the error.
func (c *Coordinator) reject(ctx context.Context, rec *record, err error) error {
	c.log.Warn("run rejected", "run_id", rec.RunID, "error", err)
	if bus.ValidToken(rec.RunID) != nil {
		return nil // nothing addressable to record; the request is dropped with the log line
	}
	rec.Status, rec.Error, rec.FinishedAt = RunFailed, err.Error(), time.Now().UTC()
	if data, merr := json.Marshal(rec); merr == nil {
		if _, perr := c.bus.Runs().Create(ctx, runKey(rec.RunID), data); perr != nil && !errors.Is(perr, bus.ErrExists) {
			return perr
		}
	}
	c.event(ctx, rec, bus.Event{Kind: bus.EventRunRejected, Error: err.Error()})
	c.event(ctx, rec, bus.Event{Kind: bus.EventRunFinished, Status: string(RunFailed), Error: err.Error()})
	return nil
}

// event publishes a progress event of rec's run, best effort: losing an
// event loses no state (the record has it), so a failure is logged.
func (c *Coordinator) event(ctx context.Context, rec *record, ev bus.Event) {
	ev.RunID, ev.RootRunID, ev.Manifest = rec.RunID, rec.RootRunID, rec.Manifest
	if err := c.bus.PublishEvent(context.WithoutCancel(ctx), ev); err != nil {
		c.log.Warn("event not published", "run_id", rec.RunID, "kind", ev.Kind, "error", err)
	}
}

// NewRunID returns a new run ID: sortable by time, unique, and a valid
// subject token ("20261122T211243Z-9f3a1c5e7b").
func NewRunID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

package worker

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/safefs"
)

// Config configures a Worker.
type Config struct {
	// Bus is the provisioned bus. Required.
	Bus *bus.Bus
	// Registry builds resources. Required.
	Registry *resources.Registry
	// Name identifies the worker in outcomes and the workers bucket.
	// Defaults to host-pid.
	Name string
	// Pools the worker takes tasks of. Defaults to ["default"].
	Pools []string
	// Concurrency bounds tasks executed at once, across pools. Defaults to
	// the number of CPUs.
	Concurrency int
	// Runner runs system commands. Defaults to resources.OSRunner.
	Runner resources.CommandRunner
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Facts describe the host for templates and `manifold workers`.
	Facts map[string]any
	// GatherFacts, when set, is called every FactsInterval to refresh
	// Facts (never per task); a failed refresh keeps the facts it had.
	GatherFacts func(ctx context.Context) (map[string]any, error)
	// FactsInterval is how often GatherFacts runs. Defaults to 10 minutes.
	FactsInterval time.Duration
	// Version is reported in the workers bucket.
	Version string
	// DebtDir keeps the host's refresh debts (a refresh owed to a
	// subscriber whose run failed, was skipped or never came): see
	// DefaultDebtDir. Empty keeps them in memory only, for the process's
	// life (tests).
	DebtDir string
	// TracerProvider defaults to otel's global provider.
	TracerProvider trace.TracerProvider
	// MeterProvider defaults to otel's global provider.
	MeterProvider metric.MeterProvider
	// CacheDir keeps extracted bundles. Defaults to the user's cache
	// directory (~/.cache/manifold) or, without one, a temporary directory.
	CacheDir string
	// DisableAssignments leaves the assignments of the worker's pools
	// alone. By default the worker watches the assignments bucket and
	// keeps each assignment of its pools converged (assign.go).
	DisableAssignments bool
	// ConvergeTimeout bounds the wait for one convergence run of an
	// assignment. Defaults to DefaultConvergeTimeout (1h).
	ConvergeTimeout time.Duration
	// ConvergePoll is how long a coordinator may hold a convergence
	// request before answering that the run goes on (the worker then asks
	// again, any coordinator answering). Defaults to DefaultConvergePoll
	// (30s).
	ConvergePoll time.Duration
	// StateDir keeps the cached plans of the worker's assignments
	// (plans/) and its spool of offline runs (offline/): see
	// DefaultStateDir and docs/offline.md. Empty keeps them in memory
	// only, for the process's life (tests).
	StateDir string
	// PlanCacheMaxBytes bounds the cached plan of one assignment, encoded;
	// a larger plan is not cached (interval checks are then full runs, and
	// the assignment is not converged while the bus is out of reach).
	// Defaults to DefaultPlanCacheMaxBytes (64 MiB).
	PlanCacheMaxBytes int
	// SpoolMax bounds the offline runs kept until they are reported; past
	// it the oldest is dropped with a warning. Defaults to
	// DefaultSpoolMax (1000).
	SpoolMax int
	// HeartbeatCheck is how often the worker looks whether its entry in
	// the workers bucket changed (facts, pools, version, assignments'
	// states): a changed entry is written then, an unchanged one every
	// WorkerTTL/3, which keeps it alive (and carries the running tasks
	// and the last run, which change with every task). Defaults to
	// DefaultHeartbeatCheck (5s); never more than WorkerTTL/3.
	HeartbeatCheck time.Duration
	// PoolConsumers, when set, gives the consumer to take a pool's tasks
	// with, by pool, instead of the worker binding its own: one Consumer
	// shared by the workers of one process, whose Next calls take turns,
	// so the pool's consumer on the server holds one waiting pull for
	// all of them. For processes that simulate many hosts (benchmarks):
	// a real host runs one worker and binds its own (nil).
	PoolConsumers map[string]*bus.Consumer
}

// WithDefaults returns cfg with zero fields set to their defaults.
func (cfg Config) WithDefaults() Config {
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = cmp.Or(host, "worker") + "-" + strconv.Itoa(os.Getpid())
	}
	if len(cfg.Pools) == 0 {
		cfg.Pools = []string{bus.DefaultPool}
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, runtime.NumCPU())
	if cfg.Runner == nil {
		cfg.Runner = resources.OSRunner{}
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if cfg.MeterProvider == nil {
		cfg.MeterProvider = otel.GetMeterProvider()
	}
	cfg.PlanCacheMaxBytes = cmp.Or(cfg.PlanCacheMaxBytes, DefaultPlanCacheMaxBytes)
	cfg.SpoolMax = cmp.Or(cfg.SpoolMax, DefaultSpoolMax)
	cfg.HeartbeatCheck = cmp.Or(cfg.HeartbeatCheck, DefaultHeartbeatCheck)
	if cfg.CacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cfg.CacheDir = filepath.Join(base, "manifold")
	}
	return cfg
}

func (cfg Config) validate() error {
	if cfg.Bus == nil || cfg.Registry == nil {
		return errors.New("worker: config needs a bus and a registry")
	}
	if cfg.PlanCacheMaxBytes < 0 || cfg.SpoolMax < 0 {
		return fmt.Errorf("worker: plan cache bound %d and spool bound %d must not be negative", cfg.PlanCacheMaxBytes, cfg.SpoolMax)
	}
	if cfg.HeartbeatCheck < 0 {
		return fmt.Errorf("worker: heartbeat check %s must not be negative", cfg.HeartbeatCheck)
	}
	if cfg.Concurrency < 1 {
		return fmt.Errorf("worker: concurrency %d must be at least 1", cfg.Concurrency)
	}
	if err := bus.ValidToken(bus.PinnedPool(cfg.Name)); err != nil {
		return fmt.Errorf("worker: name (it also names the worker's own pool %q): %w", bus.PinnedPool(cfg.Name), err)
	}
	for _, p := range cfg.Pools {
		if err := bus.ValidToken(p); err != nil {
			return fmt.Errorf("worker: pool: %w", err)
		}
	}
	return nil
}

// Worker executes tasks of its pools.
type Worker struct {
	cfg Config
	// currentFacts holds the facts of the last refresh (nil: cfg.Facts).
	currentFacts atomic.Pointer[map[string]any]
	// publishedFacts is the digest of the facts the last registration
	// published: the facts a coordinator compiles this worker's runs
	// with (a cached plan is stamped with it: plan.go).
	publishedFacts atomic.Pointer[string]
	// regMu orders registrations, so publishedFacts is the digest of the
	// entry written last.
	regMu sync.Mutex
	// factsEnc is the facts' JSON and digest of the last registration
	// (guarded by regMu): facts change only when refreshed (a new map),
	// so a heartbeat encodes them again only then.
	factsEnc factsEncoding
	// written is the last entry written without its seen time, and
	// writtenAt when (guarded by regMu): a heartbeat writes an unchanged
	// entry only when it is due to be kept alive.
	written   []byte
	writtenAt time.Time

	bus    *bus.Bus
	log    *slog.Logger
	tracer trace.Tracer
	slots  chan struct{}

	metrics *metrics
	// debts are the refreshes this host owes.
	debts *debts

	bundles bundleDirs

	// batchTypes remembers, by resource type, whether its resources are
	// resources.Batchers (learnt from the first one built), so resources of
	// other types are not built twice to find out.
	batchTypes sync.Map

	mu      sync.Mutex
	cancel  context.CancelCauseFunc // stops taking tasks
	kill    context.CancelCauseFunc // cancels running tasks
	wg      sync.WaitGroup
	tasksWG sync.WaitGroup
	// idle hands a task to a handler waiting for one; handlersStop,
	// closed once no task is handed out any more, ends them.
	idle         chan job
	handlersStop chan struct{}
	stopHandlers sync.Once
	// handlersStarted counts the handlers started (tests).
	handlersStarted atomic.Int64
	stopped         bool

	stopCancels func()

	assign *assigner // nil with DisableAssignments
	// fleet is the worker's last run and drift repairs (register.go).
	fleet fleetNotes

	runMu   sync.Mutex
	running map[string]string                             // task message ID → ref
	cancels map[string]map[string]context.CancelCauseFunc // run ID → task message ID → cancel
	// cancelled holds the runs cancelled lately (run ID → when): a segment
	// of one executes no more of its resources.
	cancelled map[string]time.Time
	// acks holds the acks of finished tasks (heldAcks).
	acks heldAcks
	// notCancelled holds the runs the cancels bucket said were not
	// cancelled (run ID → the connection's reconnection count then): see
	// dropCancelled.
	notCancelled map[string]uint64
}

// New returns a worker; Start starts it.
func New(cfg Config) (*Worker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.MeterProvider, cfg.Name)
	if err != nil {
		return nil, fmt.Errorf("worker: metrics: %w", err)
	}
	owed, err := openDebts(cfg.DebtDir)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	w := &Worker{
		debts:        owed,
		metrics:      m,
		cfg:          cfg,
		bus:          cfg.Bus,
		log:          cfg.Logger.With("component", "worker", "worker", cfg.Name),
		tracer:       cfg.TracerProvider.Tracer("github.com/manifold-run/manifold/worker"),
		slots:        make(chan struct{}, cfg.Concurrency),
		running:      map[string]string{},
		idle:         make(chan job),
		handlersStop: make(chan struct{}),
	}
	w.acks.log = w.log
	if !cfg.DisableAssignments {
		if w.assign, err = newAssigner(w); err != nil {
			return nil, fmt.Errorf("worker: metrics: %w", err)
		}
	}
	return w, nil
}

// Name returns the worker's name.
func (w *Worker) Name() string { return w.cfg.Name }

// errStopping is the cause of contexts ended by Stop.
var errStopping = errors.New("worker stopping")

// Start registers the worker, binds to its pools' consumers and returns;
// tasks are taken in the background until Stop or until ctx ends.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil || w.stopped {
		return errors.New("worker: already started")
	}
	// The pools' consumers, the pinned tasks' stream and the registration
	// are round trips to the server that do not depend on one another:
	// sent at once (a fleet's hosts start against a busy server).
	consumers := make([]taskSource, len(w.cfg.Pools)+2)
	errs := make([]error, len(consumers)+1)
	var wg sync.WaitGroup
	for i, pool := range w.cfg.Pools {
		if c := w.cfg.PoolConsumers[pool]; c != nil {
			consumers[i] = c
			continue
		}
		wg.Go(func() {
			c, err := w.bus.TaskConsumer(ctx, pool)
			consumers[i], errs[i] = c, err
		})
	}
	// Its own pool, for runs pinned to this worker (fleet fan-out): read
	// without a consumer of its own, so a fleet is not bounded by the
	// server's consumers per stream (bus.PinnedTasks). Coordinators of
	// earlier versions put them with the pools' tasks, where they are
	// read too (a mixed-version fleet, tasks queued before an upgrade).
	n := len(w.cfg.Pools)
	wg.Go(func() {
		p, err := w.bus.PinnedTasks(ctx, w.cfg.Name)
		consumers[n], errs[n] = p, err
	})
	wg.Go(func() {
		p, err := w.bus.LegacyPinnedTasks(ctx, w.cfg.Name)
		consumers[n+1], errs[n+1] = p, err
	})
	var regErr error
	wg.Go(func() { regErr = w.register(ctx) })
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			if regErr == nil { // not a live worker after all
				_ = w.bus.Workers().Delete(context.WithoutCancel(ctx), w.cfg.Name)
			}
			return fmt.Errorf("worker: %w", err)
		}
	}
	if regErr != nil {
		return regErr
	}
	pools := append(append([]string(nil), w.cfg.Pools...), bus.PinnedPool(w.cfg.Name), bus.PinnedPool(w.cfg.Name))
	stopCancels, err := w.bus.SubscribeCancels(w.cancelRun)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	base := context.WithoutCancel(ctx)
	takeCtx, cancel := context.WithCancelCause(base)
	killCtx, kill := context.WithCancelCause(base)
	w.cancel, w.kill = cancel, kill
	stopOnParent := context.AfterFunc(ctx, func() { cancel(errStopping); kill(errStopping) })
	for i, c := range consumers {
		w.wg.Go(func() { w.take(takeCtx, killCtx, pools[i], c) })
	}
	w.wg.Go(func() { w.heartbeat(takeCtx) })
	if w.cfg.GatherFacts != nil {
		w.wg.Go(func() { w.refreshFacts(takeCtx) })
	}
	if w.assign != nil {
		w.wg.Go(func() { w.assign.run(takeCtx) })
	}
	w.wg.Go(func() { <-takeCtx.Done(); stopOnParent() })
	w.stopCancels = stopCancels
	return nil
}

// Stop drains: it takes no new tasks, waits for running tasks to finish
// and deregisters. It is idempotent and safe when never started.
func (w *Worker) Stop() { w.stop(false) }

// Kill cancels running tasks (their processes are killed), then stops.
func (w *Worker) Kill() { w.stop(true) }

func (w *Worker) stop(hard bool) {
	w.mu.Lock()
	cancel, kill, already := w.cancel, w.kill, w.stopped
	w.stopped = true
	w.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel(errStopping)
	if hard {
		kill(errStopping)
	}
	w.wg.Wait()
	w.stopHandlers.Do(func() { close(w.handlersStop) }) // no task is handed out any more
	w.tasksWG.Wait()                                    // cancellations are still heard while draining
	w.acks.send()
	w.stopCancels()
	kill(errStopping)
	if !already {
		ctx, done := context.WithTimeout(context.Background(), 2*time.Second)
		defer done()
		if err := w.bus.Workers().Delete(ctx, w.cfg.Name); err != nil {
			w.log.Warn("deregister failed; the entry expires", "error", err)
		}
	}
}

// taskSource hands out the tasks of one pool: a pool's consumer, or the
// worker's own pool (bus.PinnedTasks).
type taskSource interface {
	Next(ctx context.Context) (*bus.Delivery, error)
}

// take pulls tasks of one pool while slots are free.
func (w *Worker) take(takeCtx, killCtx context.Context, pool string, c taskSource) {
	for {
		// Wait for capacity, without holding it while this pool is idle:
		// a worker of several pools (its own pool included) must not let
		// an idle pool's fetch starve the others.
		select {
		case w.slots <- struct{}{}:
			<-w.slots
		case <-takeCtx.Done():
			return
		}
		d, err := c.Next(takeCtx)
		// The next task is stored: the held acks remove their tasks
		// without emptying the stream (heldAcks).
		w.acks.send()
		if err != nil {
			if takeCtx.Err() == nil {
				w.log.Error("task consumer stopped", "pool", pool, "error", err)
			}
			return
		}
		if !w.reserve(takeCtx, d) {
			_ = d.Nak(0) // stopping: let another worker have it now
			return
		}
		select {
		case w.idle <- job{ctx: killCtx, d: d}: // a handler waiting for work
		default:
			w.handlersStarted.Add(1)
			w.tasksWG.Go(func() { w.handler(job{ctx: killCtx, d: d}) })
		}
	}
}

// job is a delivered task for a handler.
type job struct {
	ctx context.Context
	d   *bus.Delivery
}

// handlerIdle is how long a handler that finished its task waits for the
// next before it ends.
const handlerIdle = time.Minute

// handler handles j, then the tasks handed to it while it waits on
// w.idle (at most handlerIdle each time): a task started on a fresh
// goroutine grew its stack again each time (copied twice or three times
// on its way into a resource's check: a tenth of a worker's CPU in a
// chain of tasks). One is started only when none waits, so there are
// about as many as slots (one may be ending its last task while another
// starts); an idle one ends after handlerIdle.
func (w *Worker) handler(j job) {
	idle := time.NewTimer(handlerIdle)
	defer idle.Stop()
	var keep handlerCache
	defer keep.close()
	for {
		w.handleIn(j.ctx, j.d, &keep)
		<-w.slots
		idle.Reset(handlerIdle)
		select {
		case j = <-w.idle:
		case <-idle.C:
			return
		case <-w.handlersStop:
			return
		}
	}
}

// maxHandlerCacheTasks bounds the tasks of one run that share a
// handler's cache (handlerCache), as a segment bounds its resources.
const maxHandlerCacheTasks = 256

// handlerCache is what the single tasks of one run handled one after
// another by one handler share, as the resources of a segment do: the
// parent directories they open (safefs.Dirs) and one copy of the process
// environment. A chain of tasks (each requiring the one before) walked
// each file's parent directory from "/" again for every task (9 % of the
// worker's CPU). It is dropped at a task of another run, after
// maxHandlerCacheTasks tasks, and when the handler ends.
type handlerCache struct {
	dirs  *safefs.Dirs
	env   map[string]string
	run   string
	tasks int
}

// forTask returns the cache for a task of run.
func (c *handlerCache) forTask(run string) (*safefs.Dirs, map[string]string) {
	if c.dirs == nil || c.run != run || c.tasks >= maxHandlerCacheTasks {
		c.close()
		c.dirs, c.env, c.run = safefs.NewDirs(), environ(), run
	}
	c.tasks++
	return c.dirs, c.env
}

func (c *handlerCache) close() {
	if c.dirs != nil {
		_ = c.dirs.Close()
	}
	*c = handlerCache{}
}

// reserve takes a slot for a delivered task. Another pool may have filled
// the slots since the capacity check: the task then waits here, kept from
// redelivery by progress signals. At most one task per pool waits so.
func (w *Worker) reserve(ctx context.Context, d *bus.Delivery) bool {
	select {
	case w.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTicker(max(w.bus.Config().TaskAckWait/3, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case w.slots <- struct{}{}:
			return true
		case <-t.C:
			_ = d.InProgress()
		case <-ctx.Done():
			return false
		}
	}
}

// Registration is a worker's entry in the workers bucket.
type Registration struct {
	Name        string         `json:"name"`
	Pools       []string       `json:"pools"`
	Concurrency int            `json:"concurrency"`
	Running     []string       `json:"running"`
	Version     string         `json:"version,omitempty"`
	Facts       map[string]any `json:"facts,omitempty"`
	Started     time.Time      `json:"started"`
	Seen        time.Time      `json:"seen"`
	// Assignments is the convergence state of each assignment the worker
	// keeps converged, by name.
	Assignments map[string]AssignmentStatus `json:"assignments,omitempty"`
	// Fleet is the worker's last run and drift repairs (`manifold fleet`).
	Fleet *FleetStatus `json:"fleet,omitempty"`
}

// register writes the worker's entry in the workers bucket now (its
// state changed: started, an assignment converged, back online).
func (w *Worker) register(ctx context.Context) error { return w.registerUnlessFresh(ctx, 0) }

// registerUnlessFresh writes the worker's entry in the workers bucket,
// unless it has not changed (but for its seen time) since it was written
// less than keepAlive ago; keepAlive 0 writes it in any case.
func (w *Worker) registerUnlessFresh(ctx context.Context, keepAlive time.Duration) error {
	// One at a time: the entry written last holds the newest state, and
	// publishedFacts its facts.
	w.regMu.Lock()
	defer w.regMu.Unlock()
	w.runMu.Lock()
	running := make([]string, 0, len(w.running))
	for id, ref := range w.running {
		running = append(running, id+" "+ref)
	}
	w.runMu.Unlock()
	slices.Sort(running)
	reg := Registration{Name: w.cfg.Name, Pools: w.cfg.Pools, Concurrency: w.cfg.Concurrency, Running: running,
		Version: w.cfg.Version, Facts: w.facts(), Started: startTime}
	if w.assign != nil {
		reg.Assignments = w.assign.snapshot()
	}
	reg.Fleet = w.fleet.status()
	facts := w.factsEnc.encode(reg.Facts)
	// What readers act on (the facts a fan-out compiles with, the
	// pools, the assignments' states) is written at the next look when
	// it changed; the running tasks and the last run (what `manifold
	// workers` and `manifold fleet` show) change with every task, and are
	// written with the keep-alive, so a fleet run does not cost a write
	// per host.
	entry := registrationJSON{Name: reg.Name, Pools: reg.Pools, Concurrency: reg.Concurrency,
		Version: reg.Version, Facts: facts.json, Started: reg.Started, Assignments: reg.Assignments}
	unseen, _ := json.Marshal(entry)
	now := time.Now()
	if keepAlive > 0 && bytes.Equal(unseen, w.written) && now.Sub(w.writtenAt) < keepAlive {
		return nil
	}
	entry.Seen, entry.Running, entry.Fleet = now.UTC(), reg.Running, reg.Fleet
	data, _ := json.Marshal(entry)
	if _, err := w.bus.Workers().Put(ctx, w.cfg.Name, data); err != nil {
		return fmt.Errorf("worker: register: %w", err)
	}
	w.written, w.writtenAt = unseen, now
	w.publishedFacts.Store(&facts.digest)
	return nil
}

// registrationJSON is a Registration as written: the same fields in the
// same order, the facts already encoded (json.Marshal of a Registration
// gives the same bytes).
type registrationJSON struct {
	Name        string                      `json:"name"`
	Pools       []string                    `json:"pools"`
	Concurrency int                         `json:"concurrency"`
	Running     []string                    `json:"running"`
	Version     string                      `json:"version,omitempty"`
	Facts       json.RawMessage             `json:"facts,omitempty"`
	Started     time.Time                   `json:"started"`
	Seen        time.Time                   `json:"seen"`
	Assignments map[string]AssignmentStatus `json:"assignments,omitempty"`
	Fleet       *FleetStatus                `json:"fleet,omitempty"`
}

// factsEncoding is the JSON and the digest (factsDigest) of one facts map.
type factsEncoding struct {
	of     unsafe.Pointer // the map encoded; nil before the first
	json   json.RawMessage
	digest string
	// encodes counts the maps encoded (tests).
	encodes int
}

// encode returns the encoding of facts, computed again only when facts is
// not the map encoded last. A worker's facts are replaced, never changed
// in place: cfg.Facts, then each refresh's new map (refreshFacts).
func (e *factsEncoding) encode(facts map[string]any) factsEncoding {
	if p := reflect.ValueOf(facts).UnsafePointer(); p != e.of || e.encodes == 0 {
		b, _ := json.Marshal(facts)
		sum := sha256.Sum256(b)
		e.of, e.digest, e.json = p, hex.EncodeToString(sum[:]), nil
		if len(facts) > 0 { // omitted, as a Registration's empty Facts
			e.json = b
		}
		e.encodes++
	}
	return *e
}

// factsPublished returns the digest of the facts the worker's entry
// holds ("" before its first registration).
func (w *Worker) factsPublished() string {
	if d := w.publishedFacts.Load(); d != nil {
		return *d
	}
	return ""
}

var startTime = time.Now().UTC()

// facts returns the host's current facts.
func (w *Worker) facts() map[string]any {
	if f := w.currentFacts.Load(); f != nil {
		return *f
	}
	return w.cfg.Facts
}

// refreshFacts gathers the facts again every FactsInterval; the next
// heartbeat publishes them and the next task renders with them.
func (w *Worker) refreshFacts(ctx context.Context) {
	t := time.NewTicker(cmp.Or(w.cfg.FactsInterval, DefaultFactsInterval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f, err := w.cfg.GatherFacts(ctx)
			if err != nil {
				if ctx.Err() == nil {
					w.log.Warn("facts not refreshed; keeping the previous ones", "error", err)
				}
				continue
			}
			w.currentFacts.Store(&f)
		}
	}
}

// DefaultFactsInterval is the default of Config.FactsInterval.
const DefaultFactsInterval = 10 * time.Minute

// DefaultHeartbeatCheck is the default of Config.HeartbeatCheck.
const DefaultHeartbeatCheck = 5 * time.Second

// heartbeatTimes returns how long an unchanged entry is left as written
// (a third of the workers bucket's TTL, so two heartbeats may be missed
// before it expires) and how often the worker looks for changes.
func heartbeatTimes(ttl, check time.Duration) (keepAlive, every time.Duration) {
	keepAlive = max(ttl/3, 100*time.Millisecond)
	return keepAlive, min(check, keepAlive)
}

// heartbeat keeps the worker's entry alive and up to date: every
// HeartbeatCheck it writes the entry if what readers act on changed
// (registerUnlessFresh), and every WorkerTTL/3 in any case. The entry's TTL is the worker's liveness for every reader
// (a fan-out's targets, `manifold workers`, `manifold fleet`, the web
// view): a worker that dies without deregistering leaves it for at most
// WorkerTTL.
func (w *Worker) heartbeat(ctx context.Context) {
	keepAlive, every := heartbeatTimes(w.bus.Config().WorkerTTL, w.cfg.HeartbeatCheck)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// A tick late by up to every must still find the entry
			// due: written a tick early rather than a tick late.
			if err := w.registerUnlessFresh(ctx, keepAlive-every/2); err != nil && ctx.Err() == nil {
				w.log.Warn("heartbeat failed", "error", err)
			}
		}
	}
}

// errRunCancelled is the cause of a task context ended by its run's
// cancellation.
var errRunCancelled = errors.New("run cancelled")

// cancelRun cancels the running tasks of a cancelled run, and of the
// runs of its tree when it is a root run: their processes are killed.
// Tasks of the run taken later are dropped (runCancelled).
func (w *Worker) cancelRun(runID string) {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	now := time.Now()
	if w.cancelled == nil {
		w.cancelled = map[string]time.Time{}
	}
	for id, at := range w.cancelled {
		if now.Sub(at) > cancelledMemory {
			delete(w.cancelled, id)
		}
	}
	w.cancelled[runID] = now
	for _, cancel := range w.cancels[runID] {
		cancel(errRunCancelled)
	}
}

// cancelledMemory is how long a worker remembers a cancelled run.
const cancelledMemory = time.Hour

// runCancelled reports whether the run of task, or its root run, was
// cancelled lately (as announced on the control subject).
func (w *Worker) runCancelled(task bus.Task) bool {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	_, ok := w.cancelled[task.RunID]
	if !ok && task.RootRunID != "" {
		_, ok = w.cancelled[task.RootRunID]
	}
	return ok
}

// trackCancel registers the cancel func of a running task, under its run
// and its root run (a cancelled root run kills its tree's tasks); the
// returned func unregisters it.
func (w *Worker) trackCancel(task bus.Task, cancel context.CancelCauseFunc) func() {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	if w.cancels == nil {
		w.cancels = map[string]map[string]context.CancelCauseFunc{}
	}
	id := task.MsgID()
	runs := []string{task.RunID}
	if task.RootRunID != "" && task.RootRunID != task.RunID {
		runs = append(runs, task.RootRunID)
	}
	for _, run := range runs {
		if w.cancels[run] == nil {
			w.cancels[run] = map[string]context.CancelCauseFunc{}
		}
		w.cancels[run][id] = cancel
	}
	return func() {
		w.runMu.Lock()
		defer w.runMu.Unlock()
		for _, run := range runs {
			delete(w.cancels[run], id)
			if len(w.cancels[run]) == 0 {
				delete(w.cancels, run)
			}
		}
	}
}

// claim marks a task attempt as running here. It returns false when it
// already is: the message was redelivered (AckWait passed) while the first
// delivery still runs, and must not run a second time.
func (w *Worker) claim(id, ref string) bool {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	if _, dup := w.running[id]; dup {
		return false
	}
	w.running[id] = ref
	return true
}

func (w *Worker) track(id, ref string, on bool) {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	if on {
		w.running[id] = ref
	} else {
		delete(w.running, id)
	}
}

// short trims s to n bytes for log lines.
func short(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

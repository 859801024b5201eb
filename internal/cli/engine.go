package cli

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/tmpdir"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/resources/document"
	"github.com/manifold-run/manifold/worker"
)

// embedded is the in-process engine of `manifold apply` without --server:
// a NATS server with JetStream (no listener, store in a private temporary
// directory), a coordinator and a worker, all talking through JetStream
// exactly as separate processes would. Two at once never collide: no
// ports, separate stores.
type embedded struct {
	dir    string
	srv    *bus.Server
	bus    *bus.Bus
	coord  *coordinator.Coordinator
	worker *worker.Worker
	// plans hands the coordinator the plans this process compiled for
	// the runs it submits (coordinator.Config.Compiled).
	plans planHandoff
	// reports hands the CLI the reports of the runs it follows, as the
	// coordinator stored them (coordinator.Config.Finished).
	reports reportHandoff
	// events tells the coordinator which events of a run tree its
	// follower reads (coordinator.Config.EventsRead): the server has no
	// listener, so no one else can.
	events eventsHandoff
	// bundle is the name of the bundle handed over by embeddedOpts.Bundle
	// and kept (bus.KeepBundle) while the coordinator and the worker
	// started, bundleErr why it was not.
	bundle     string
	bundleErr  error
	bundleDone chan struct{} // closed once bundle or bundleErr is set, or no bundle came
	// swept is closed once the stores of engines killed earlier are
	// removed (startEmbedded); stop waits for it.
	swept chan struct{}
}

// eventsHandoff holds, by root run ID, the event kinds the CLI follows
// (followedKinds); a run tree not in it has every kind published.
type eventsHandoff struct {
	mu    sync.Mutex
	kinds map[string][]bus.EventKind
}

// put records the kinds runID's follower reads (nil: all).
func (h *eventsHandoff) put(runID string, kinds []bus.EventKind) {
	if kinds == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.kinds == nil {
		h.kinds = map[string][]bus.EventKind{}
	}
	h.kinds[runID] = kinds
}

// read is coordinator.Config.EventsRead.
func (h *eventsHandoff) read(rootRunID string) []bus.EventKind {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.kinds[rootRunID]
}

// planHandoff holds compiled plans by run ID until the coordinator takes
// them, once.
type planHandoff struct {
	mu    sync.Mutex
	plans map[string]*coordinator.Plan
}

func (h *planHandoff) put(runID string, p *coordinator.Plan) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.plans == nil {
		h.plans = map[string]*coordinator.Plan{}
	}
	h.plans[runID] = p
}

func (h *planHandoff) take(runID string) (*coordinator.Plan, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.plans[runID]
	delete(h.plans, runID)
	return p, ok
}

// reportHandoff holds the reports of the runs a CLI waits for, from the
// embedded coordinator that finished them, until the CLI takes them: a
// 20,000-resource report read back from the store and decoded was 23 ms,
// and encoded again 45 ms, of a converged apply's wall.
type reportHandoff struct {
	mu      sync.Mutex
	wanted  map[string]chan struct{} // closed when the report is handed over
	reports map[string]storedReport
}

// storedReport is a run's report as its coordinator stored it.
type storedReport struct {
	rep  *coordinator.Report
	data []byte
}

// want asks for runID's report (only the reports asked for are kept).
func (h *reportHandoff) want(runID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wanted == nil {
		h.wanted = map[string]chan struct{}{}
	}
	if h.wanted[runID] == nil {
		h.wanted[runID] = make(chan struct{})
	}
}

// handed is closed once runID's report (wanted) is handed over; nil when
// it is not wanted (a nil channel: never).
func (h *reportHandoff) handed(runID string) <-chan struct{} {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wanted[runID]
}

// put is coordinator.Config.Finished: a report wanted and whole (see
// whole) is kept here, not stored. The engine's store is the process's
// own, and the CLI that wants the report reads it from here only (a
// 20,000-resource report was 5.3 MB put in chunks, 20 MB allocated and
// 5.5 ms of the run's end); any other is stored, as a report nesting
// child runs' reports, which GetReport reads from the store.
func (h *reportHandoff) put(runID string, rep *coordinator.Report, data []byte) (kept bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ready, ok := h.wanted[runID]
	if !ok {
		return false
	}
	if _, again := h.reports[runID]; again {
		return false
	}
	if h.reports == nil {
		h.reports = map[string]storedReport{}
	}
	h.reports[runID] = storedReport{rep: rep, data: data}
	close(ready)
	return whole(rep)
}

// take returns runID's report once, if the coordinator handed it over and
// it is the whole report GetReport would return: one that nests no child
// run's report (those are read from the store) and whose post_message
// stands.
func (h *reportHandoff) take(runID string) (storedReport, bool) {
	if h == nil {
		return storedReport{}, false
	}
	h.mu.Lock()
	sr, ok := h.reports[runID]
	delete(h.reports, runID)
	delete(h.wanted, runID)
	h.mu.Unlock()
	if !ok || !whole(sr.rep) {
		return storedReport{}, false
	}
	return sr, true
}

// whole says rep, as its coordinator hands it over, is the report
// GetReport would return: it nests no child run's report (those are read
// from the store) and its post_message stands.
func whole(rep *coordinator.Report) bool {
	if rep.Status != coordinator.RunSucceeded && rep.PostMessage != "" {
		return false
	}
	for _, r := range rep.Resources {
		if r.ChildRunID != "" && r.Child == nil {
			return false
		}
	}
	return true
}

// embeddedStorePrefix names the store directories of embedded engines in
// tmpdir.Base (a tmpfs, /dev/shm, unless TMPDIR is set).
const embeddedStorePrefix = "manifold-embedded-"

// removeAbandonedStores removes the store directories of embedded engines
// whose process is gone (killed before it could remove its own): those
// whose lock no live process holds.
func removeAbandonedStores(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, embeddedStorePrefix+"*"))
	for _, dir := range dirs {
		if bus.StoreAbandoned(dir) {
			_ = os.RemoveAll(dir)
		}
	}
}

type embeddedOpts struct {
	Logger      *slog.Logger
	MaxDepth    int
	MaxTreeRuns int
	Concurrency int
	// Facts are this host's, for the worker's templates.
	Facts map[string]any
	// NoWorker starts the server and the coordinator only (see
	// startWorker).
	NoWorker bool
	// WorkerFacts, when set, gives the worker's facts (replacing Facts)
	// once the command has them; the worker waits for them while the
	// coordinator starts. Closed without a value: the engine is
	// abandoned (errEngineAbandoned).
	WorkerFacts <-chan map[string]any
	// Watch tunes the engine for apply --watch, a process that lives for
	// days (watchBusConfig, watchScanInterval); RunTimeout is its
	// --timeout.
	Watch      bool
	RunTimeout time.Duration
	// StartAfter, when set, holds the start back until it is closed:
	// the command closes it once this host's facts are gathered
	// (startingEngine.factsGathered). The compile waits for the facts
	// once the manifest is parsed and the engine's start does not need
	// them before its worker; on two cores the start's server, streams
	// and consumers took the second core from the facts (gathered 9.4 ms
	// after main rather than 4.1 on a converged 2,000-file apply, which
	// compiled 1.3 ms later for it and was submitted 1 ms later).
	StartAfter <-chan struct{}
	// HoldForFacts makes startEmbeddedAsync hold the start until
	// factsGathered (StartAfter): for a manifest whose compile outlasts
	// the engine's start (holdEngineForFacts). A small one's compile is
	// done first and the engine's start is its path (a 1-file apply was
	// submitted 1 ms later held).
	HoldForFacts bool
	// Bundle, when set, gives the archive of the run's bundle once the
	// command has packed it: it is kept in the bus's memory
	// (embedded.bundle, bus.KeepBundle) while the coordinator and the
	// worker start, not after. Closed without a value: no bundle.
	Bundle <-chan []byte
}

func startEmbedded(ctx context.Context, o embeddedOpts) (_ *embedded, err error) {
	if o.StartAfter != nil {
		select {
		case <-o.StartAfter:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// See warmServerIdentity: beside the engine's first steps.
	go warmServerIdentity()
	e := &embedded{}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	// The stores of engines killed before they removed theirs go beside
	// the start: a scan of /dev/shm and the temporary directory, 0.1 to
	// 1 ms here and more on a host whose /tmp holds thousands of
	// entries. This engine's own store is never taken for one: it is
	// not abandoned while its lock is younger than 10 s or held.
	e.swept = make(chan struct{})
	go func() {
		defer close(e.swept)
		for _, base := range tmpdir.Bases() {
			removeAbandonedStores(base)
		}
	}()
	if e.dir, err = os.MkdirTemp(tmpdir.Base(), embeddedStorePrefix); err != nil {
		return nil, fmt.Errorf("embedded engine: store directory: %w", err)
	}
	mark(ctx, PhaseEngineStore)
	if e.srv, err = bus.StartServer(bus.ServerConfig{StoreDir: e.dir}); err != nil {
		return nil, err
	}
	mark(ctx, PhaseEngineServer)
	nc, err := e.srv.Connect("manifold-apply")
	if err != nil {
		return nil, err
	}
	mark(ctx, PhaseEngineConnected)
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The store is private to this process and removed at exit: memory
	// storage saves the file writes. The server was just started: its
	// streams are created without looking for existing ones first, and
	// what few runs need when they need it (OnDemand: this bus is the
	// server's only one).
	bcfg, scan := bus.Config{MemoryStorage: true, Fresh: true, OnDemand: true}, time.Duration(0)
	if o.Watch {
		bcfg, scan = watchBusConfig(bcfg, o.RunTimeout), watchScanInterval
	}
	if e.bus, err = bus.Open(octx, nc, bcfg); err != nil {
		return nil, err
	}
	mark(ctx, PhaseEngineStreams)
	// The worker and the coordinator start side by side: neither needs
	// the other's consumers or services, and their starts are mostly
	// round trips to the server (a 1-file apply waited 1.7 ms for the two
	// one after the other once its compile was done).
	var (
		started sync.WaitGroup
		werr    error
	)
	if o.Bundle != nil {
		// The bundle is kept in the bus's memory, not put in the
		// server's (bus.KeepBundle): this engine's coordinator, worker
		// and command, which share its Bus, are the only readers its
		// server has. The put was 1.3 ms of round trips on a converged
		// 2,000-file apply's path. The start does not wait for the
		// bundle: startingEngine.wait does.
		e.bundleDone = make(chan struct{})
		go func() {
			defer close(e.bundleDone)
			if archive, ok := <-o.Bundle; ok {
				if e.bundle, e.bundleErr = e.bus.KeepBundle(archive); e.bundleErr == nil {
					mark(ctx, PhaseBundleStored)
				}
			}
		}()
	}
	if !o.NoWorker {
		started.Go(func() { werr = e.startWorker(ctx, o) })
	}
	if e.coord, err = coordinator.New(coordinator.Config{Bus: e.bus, Logger: o.Logger, MaxDepth: o.MaxDepth, MaxTreeRuns: o.MaxTreeRuns, Name: "embedded",
		Compiled: e.plans.take, Finished: e.reports.put, EventsRead: e.events.read, ScanInterval: scan,
		Unsigned: true}); err == nil { // the server has no listener: nothing but this process publishes to it
		err = e.coord.Start(ctx)
	}
	if err == nil {
		mark(ctx, PhaseEngineCoordinator)
	}
	started.Wait()
	if err != nil {
		return nil, err
	}
	if werr != nil {
		return nil, werr
	}
	if !o.NoWorker {
		mark(ctx, PhaseEngineWorker)
	}
	return e, nil
}

// startWorker starts the engine's worker, with o.WorkerFacts' facts when
// set (once).
func (e *embedded) startWorker(ctx context.Context, o embeddedOpts) error {
	if o.WorkerFacts != nil {
		facts, ok := <-o.WorkerFacts
		if !ok {
			return errEngineAbandoned
		}
		o.Facts = facts
	}
	w, err := worker.New(worker.Config{Bus: e.bus, Registry: workerRegistry(e.bus), Logger: o.Logger,
		Name: "embedded", Concurrency: o.Concurrency, Version: Version, Facts: o.Facts, DebtDir: worker.DefaultDebtDir(),
		DisableAssignments: true}) // apply --watch runs its own loop (watch.go)
	if err != nil {
		return err
	}
	if err = w.Start(ctx); err != nil {
		return err
	}
	e.worker = w
	return nil
}

// startingEngine is an embedded engine starting in the background while the
// command gathers facts and compiles: the server and the coordinator need
// neither, the worker needs the facts only. It starts as soon as the
// command hands them over (startWorker), so its start overlaps the
// compile too.
type startingEngine struct {
	facts  chan map[string]any
	bundle chan []byte
	done   chan startedEngine
	// gathered is embeddedOpts.StartAfter, closed by factsGathered.
	gathered     chan struct{}
	gatheredOnce sync.Once
	// handed says startWorker was called, bundleHanded storeBundle or
	// noBundle (by the command's goroutine, the only one that calls
	// them, wait and abandon).
	handed, bundleHanded bool
}

type startedEngine struct {
	e   *embedded
	err error
}

// errEngineAbandoned ends the start of an engine the command no longer
// needs.
var errEngineAbandoned = errors.New("embedded engine: abandoned")

func startEmbeddedAsync(ctx context.Context, o embeddedOpts) *startingEngine {
	s := &startingEngine{facts: make(chan map[string]any, 1), bundle: make(chan []byte, 1), done: make(chan startedEngine, 1),
		gathered: make(chan struct{})}
	o.WorkerFacts, o.Bundle = s.facts, s.bundle
	if o.HoldForFacts {
		o.StartAfter = s.gathered
	}
	go func() {
		e, err := startEmbedded(ctx, o)
		s.done <- startedEngine{e, err}
	}()
	return s
}

// warmServerIdentity computes, beside the engine's first steps (removing
// abandoned stores, making its own), what the NATS server's start would
// otherwise compute on the engine's path: every server makes an ed25519
// identity key (nkeys.CreateServer), and the first ed25519 key of a
// process builds the curve's base point table, 1.1 ms here (the key made
// here is thrown away).
func warmServerIdentity() { _, _, _ = ed25519.GenerateKey(nil) }

// holdEngineAt is the size of a manifest file from which the engine's
// start is held until the facts are gathered (embeddedOpts.HoldForFacts):
// e2e/bench's manifests are some 110 bytes a file resource, so about 600
// resources, whose compile takes about as long as the engine's start.
const holdEngineAt = 64 << 10

// holdEngineForFacts says whether the manifest at path is large enough
// (holdEngineAt) for its compile to outlast the engine's start.
func holdEngineForFacts(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Size() >= holdEngineAt
}

// factsGathered lets the engine start (embeddedOpts.StartAfter): this
// host's facts are gathered, or will not be. Safe to call more than once,
// from any goroutine.
func (s *startingEngine) factsGathered() {
	s.gatheredOnce.Do(func() { close(s.gathered) })
}

// startWorker hands over this host's facts: the worker starts with them
// once the server and the coordinator are up. Called once.
func (s *startingEngine) startWorker(facts map[string]any) {
	s.factsGathered() // (handed, they were gathered)
	s.handed = true
	s.facts <- facts
}

// storeBundle hands over the archive of the run's bundle: the engine
// keeps it (bus.KeepBundle) while its coordinator and worker start
// (embedded.bundle, bundleErr). Called once.
func (s *startingEngine) storeBundle(archive []byte) {
	s.bundleHanded = true
	s.bundle <- archive
}

// wait returns the started engine with its worker (startWorker first)
// and the bundle handed to storeBundle stored (embedded.bundle, or
// bundleErr); none handed, none is stored.
func (s *startingEngine) wait() (*embedded, error) {
	s.factsGathered()
	s.noBundle()
	r := <-s.done
	if r.err == nil && r.e.bundleDone != nil {
		<-r.e.bundleDone
	}
	return r.e, r.err
}

// noBundle tells the engine no bundle comes, unless one was handed.
func (s *startingEngine) noBundle() {
	if !s.bundleHanded {
		s.bundleHanded = true
		close(s.bundle)
	}
}

// abandon closes the engine once it has started (the command ends early).
func (s *startingEngine) abandon() {
	s.factsGathered()
	if !s.handed {
		close(s.facts)
	}
	s.noBundle()
	if r := <-s.done; r.err == nil {
		r.e.close()
	}
}

// close stops everything and removes the store. Safe on a partly started
// engine.
func (e *embedded) close() { e.stop(false) }

// closeBeforeExit stops what acts on the host and removes the store, and
// leaves the server running for the process's exit to end: the worker
// (its commands killed) and the coordinator are stopped as by close, but
// the server's streams are not deleted nor the server shut down (1.2 ms
// of a 1-file apply's 2.3 ms teardown; the store holds nothing a
// memory-storage server writes, so it is removed while the worker and
// the coordinator stop). Only for a process that exits next
// (IO.ProcessExits).
func (e *embedded) closeBeforeExit() { e.stop(true) }

func (e *embedded) stop(exiting bool) {
	if e.swept != nil {
		defer func() { <-e.swept }()
	}
	var removed sync.WaitGroup
	if exiting && e.dir != "" {
		removed.Go(func() { _ = os.RemoveAll(e.dir) })
	}
	if e.worker != nil {
		e.worker.Kill()
	}
	if e.coord != nil {
		e.coord.Stop()
	}
	if exiting {
		removed.Wait()
		if e.dir != "" {
			// Anything written there meanwhile (the server's own
			// files) goes now; what is left is removed by the next
			// engine's start (removeAbandonedStores).
			_ = os.RemoveAll(e.dir)
		}
		return
	}
	if e.bus != nil {
		dropStreams(e.bus.Conn())
		e.bus.Conn().Close()
	}
	e.srv.Shutdown()
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
}

// dropStreams deletes the private server's streams that have consumers,
// and with them the consumers: a consumer with a pull request still
// pending makes the server's shutdown wait 50 ms for the request's client
// to hear of it. One list request, then the deletes side by side (3 of
// 13 streams after an apply: runs, tasks and events) rather than a delete
// of every stream one after the other.
func dropStreams(nc *nats.Conn) {
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for si := range js.ListStreams(ctx).Info() {
		if si.State.Consumers > 0 {
			wg.Go(func() { _ = js.DeleteStream(ctx, si.Config.Name) })
		}
	}
	wg.Wait()
}

// workerRegistry is the registry of a worker on bus b: the built-in types,
// with kv:// documents opening b's KV buckets.
func workerRegistry(b *bus.Bus) *resources.Registry {
	return builtin.RegistryWith(builtin.Config{Documents: document.Config{
		Buckets: document.BucketsFunc(func(ctx context.Context, name string) (document.KV, error) {
			kv, err := b.DocumentKV(ctx, name)
			if err != nil {
				return nil, err // not a typed nil
			}
			return kv, nil
		}),
	}})
}

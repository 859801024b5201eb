package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/telemetry"
	"github.com/manifold-run/manifold/worker"
)

// serviceFlags are the flags of the long-running commands.
type serviceFlags struct {
	conn         connFlags
	logFormat    choice
	logLevel     choice
	otlpEndpoint string
	// metricsListen serves Prometheus metrics; instance names this
	// process in telemetry (its --name), set by the command before start.
	metricsListen string
	instance      string
}

func (s *serviceFlags) register(fs *flag.FlagSet) {
	s.logFormat = choice{"text", []string{"text", "json"}}
	s.logLevel = choice{"info", []string{"debug", "info", "warn", "error"}}
	s.conn.register(fs)
	fs.Var(&s.logFormat, "log-format", "log format on stderr: text or json")
	fs.Var(&s.logLevel, "log-level", "log level: debug, info, warn or error")
	fs.StringVar(&s.otlpEndpoint, "otlp-endpoint", "", "export traces (and metrics) to this OTLP endpoint (default: OTEL_EXPORTER_OTLP_ENDPOINT; none: no export)")
	fs.StringVar(&s.metricsListen, "metrics-listen", "", "serve Prometheus metrics on http://HOST:PORT/metrics (default: none)")
}

func (s *serviceFlags) logger(w io.Writer) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(s.logLevel.value))
	opts := &slog.HandlerOptions{Level: l}
	if s.logFormat.value == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// start sets up logging, tracing and the connection of a service. The
// returned cleanup flushes traces and closes the connection.
func (s *serviceFlags) start(ctx context.Context, st IO, service, connName string) (*slog.Logger, func(), *nats.Conn, error) {
	log := s.logger(st.Stderr).With("service", service)
	s.conn.role = role(service)
	var attrs []attribute.KeyValue
	if s.instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", s.instance), attribute.String("manifold."+service, s.instance))
	}
	shutdownTraces, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "manifold-" + service, Endpoint: s.otlpEndpoint, Attributes: attrs})
	if err != nil {
		return nil, nil, nil, usageErrorf("%v", err)
	}
	metrics, err := telemetry.SetupMetrics(ctx, telemetry.MetricsConfig{ServiceName: "manifold-" + service,
		Listen: s.metricsListen, Endpoint: s.otlpEndpoint, Attributes: attrs})
	if err != nil {
		_ = shutdownTraces(context.Background())
		return nil, nil, nil, usageErrorf("%v", err)
	}
	if metrics.Addr != "" {
		log.Info("serving metrics", "url", "http://"+metrics.Addr+"/metrics")
	}
	shutdown := func(ctx context.Context) error {
		return errors.Join(shutdownTraces(ctx), metrics.Shutdown(ctx))
	}
	warned := false
	nc, err := s.conn.connectRetry(ctx, st, connName, func(err error) {
		if !warned {
			log.Warn("server not reachable yet, retrying every second", "error", err)
			warned = true
		}
	})
	if err != nil {
		_ = shutdown(context.Background())
		return nil, nil, nil, err
	}
	log.Info("connected", "server", nc.ConnectedUrlRedacted())
	cleanup := func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(fctx); err != nil {
			log.Warn("traces not flushed", "error", err)
		}
		nc.Close()
	}
	return log, cleanup, nc, nil
}

const coordinatorAbout = `Runs a coordinator until SIGINT or SIGTERM: it provisions manifold's
streams and buckets (idempotently), serves the micro service "manifold"
(manifold.api.*), takes run requests from manifold.runs.submit and drives
runs. Any number of coordinators may share a server. On SIGTERM it stops
taking runs; runs it was driving stay in the runs bucket for another
coordinator.`

func runCoordinator(ctx context.Context, st IO, args []string) int {
	var (
		sf       serviceFlags
		cfg      coordinator.Config
		replicas int
	)
	fs := newFlags("coordinator", "[--server URL] [flags]", coordinatorAbout, st, args)
	sf.register(fs)
	fs.StringVar(&cfg.Name, "name", "", "coordinator name in run records and logs (default: host-pid)")
	fs.IntVar(&cfg.MaxDepth, "max-depth", coordinator.DefaultMaxDepth, "maximum nesting of apply resources unless a run request sets its own")
	fs.IntVar(&cfg.MaxTreeRuns, "max-tree-runs", coordinator.DefaultMaxTreeRuns, "maximum child runs one run tree starts, all depths together, unless a run request sets its own")
	fs.IntVar(&cfg.MaxDepthLimit, "max-depth-limit", coordinator.DefaultMaxDepthLimit, "policy: the largest max_depth a run request may ask for (a request asking more is rejected)")
	fs.IntVar(&cfg.MaxTreeRunsLimit, "max-tree-runs-limit", coordinator.DefaultMaxTreeRunsLimit, "policy: the largest max_tree_runs a run request may ask for (a request asking more is rejected)")
	fs.IntVar(&cfg.MaxTreeLiveRuns, "max-tree-live-runs", coordinator.DefaultMaxTreeLiveRuns, "child runs of one run tree this coordinator drives at once; more wait for one to end")
	fs.DurationVar(&cfg.TaskTimeout, "task-timeout", coordinator.DefaultTaskTimeout, "timeout of a task whose resource and request set none (queue wait plus execution)")
	fs.DurationVar(&cfg.Lease, "lease", coordinator.DefaultLease, "how long this coordinator's claim on a run lasts without renewal; when it lapses a standby coordinator resumes the run")
	fs.IntVar(&replicas, "replicas", 1, "replicas of manifold's streams and buckets (3 in a 3-node cluster)")
	fs.IntVar(&cfg.MaxReports, "max-reports", coordinator.DefaultMaxReports, "reports of finished runs kept, each with its run record; past it the oldest are removed (a fan-out counts one); 0: no bound")
	fs.DurationVar(&cfg.ReportsMaxAge, "reports-max-age", coordinator.DefaultReportsMaxAge, "reports of finished runs, and their run records, older than this are removed; 0: kept for ever")
	reportsMaxBytes := byteSize(coordinator.DefaultReportsMaxBytes)
	fs.Var(&reportsMaxBytes, "reports-max-bytes", "size of the stored reports past which the oldest are removed with their run records, the last one never (bytes, or with a unit: 500MB, 10GiB); 0: no bound")
	if code, ok := parseNone(fs, st, "coordinator", args); !ok {
		return code
	}
	if cfg.MaxReports < 0 || cfg.ReportsMaxAge < 0 {
		fmt.Fprintln(st.Stderr, "manifold coordinator: --max-reports and --reports-max-age must not be negative (0: no bound)")
		return ExitInvalid
	}
	// 0 is "no bound" on the command line, negative in the config.
	if cfg.MaxReports == 0 {
		cfg.MaxReports = -1
	}
	if cfg.ReportsMaxAge == 0 {
		cfg.ReportsMaxAge = -1
	}
	if cfg.ReportsMaxBytes = int64(reportsMaxBytes); cfg.ReportsMaxBytes == 0 {
		cfg.ReportsMaxBytes = -1
	}
	if cfg.MaxDepth < 0 || cfg.TaskTimeout < 0 || replicas < 1 || cfg.MaxTreeRuns < 1 || cfg.MaxDepthLimit < 1 || cfg.MaxTreeRunsLimit < 1 || cfg.MaxTreeLiveRuns < 1 {
		fmt.Fprintln(st.Stderr, "manifold coordinator: --max-depth and --task-timeout must not be negative, --replicas, --max-tree-runs, --max-depth-limit, --max-tree-runs-limit and --max-tree-live-runs at least 1")
		return ExitInvalid
	}
	if cfg.MaxDepth > cfg.MaxDepthLimit || cfg.MaxTreeRuns > cfg.MaxTreeRunsLimit {
		fmt.Fprintf(st.Stderr, "manifold coordinator: --max-depth %d and --max-tree-runs %d must not exceed --max-depth-limit %d and --max-tree-runs-limit %d\n",
			cfg.MaxDepth, cfg.MaxTreeRuns, cfg.MaxDepthLimit, cfg.MaxTreeRunsLimit)
		return ExitInvalid
	}
	sf.instance = cfg.Name
	log, cleanup, nc, err := sf.start(ctx, st, "coordinator", "manifold-coordinator")
	if err != nil {
		return connExit(st, "coordinator", err)
	}
	defer cleanup()
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	b, err := bus.Open(octx, nc, bus.Config{Replicas: replicas, Domain: sf.conn.domain(st.Getenv)})
	cancel()
	if err != nil {
		log.Error("cannot provision the bus", "error", err)
		return ExitUnavailable
	}
	cfg.Bus, cfg.Logger = b, log
	c, err := coordinator.New(cfg)
	if err != nil {
		log.Error("bad configuration", "error", err)
		return ExitInvalid
	}
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		log.Error("cannot start", "error", err)
		return ExitUnavailable
	}
	log.Info("coordinator started", "replicas", replicas, "api", bus.SubjectAPIPrefix+".>", "intake", bus.SubjectRunSubmit)
	<-ctx.Done()
	log.Info("stopping: no new runs; runs in progress stay in the runs bucket for another coordinator")
	c.Stop()
	log.Info("coordinator stopped")
	return ExitOK
}

const workerAbout = `Runs a worker until SIGINT or SIGTERM: it registers in the workers bucket
(with a TTL heartbeat) and executes tasks of its pools, at most
--concurrency at once. On the first SIGINT or SIGTERM it drains: it takes
no new tasks, lets running ones finish (at most --drain-timeout), then
deregisters. A second signal cancels running tasks (their processes are
killed).

It waits for a coordinator to provision manifold's streams and buckets.`

func runWorker(ctx context.Context, st IO, args []string) int {
	var (
		sf           serviceFlags
		cfg          worker.Config
		pools        listFlag
		drainTimeout time.Duration
		ackWait      time.Duration
		cf           compileFlags
	)
	fs := newFlags("worker", "[--server URL] [--name ID] [--pool NAME ...] [--concurrency N] [flags]", workerAbout, st, args)
	sf.register(fs)
	fs.StringVar(&cfg.Name, "name", "", "worker name, unique among live workers (default: host-pid)")
	fs.Var(&pools, "pool", "pool to take tasks of, repeatable or comma-separated (default: default)")
	fs.IntVar(&cfg.Concurrency, "concurrency", runtime.NumCPU(), "tasks executed at once")
	fs.StringVar(&cfg.CacheDir, "cache-dir", "", "where extracted bundles are kept (default: the user's cache directory, ~/.cache/manifold)")
	fs.StringVar(&cfg.DebtDir, "debt-dir", worker.DefaultDebtDir(), "where refreshes owed to subscribers are kept across runs and restarts (under $MANIFOLD_STATE_DIR when set)")
	fs.StringVar(&cfg.StateDir, "state-dir", worker.DefaultStateDir(), "where the plans of assignments are cached and offline runs are spooled until reported (under $MANIFOLD_STATE_DIR when set)")
	fs.IntVar(&cfg.SpoolMax, "spool-max", worker.DefaultSpoolMax, "offline runs kept until reported; past it the oldest is dropped with a warning")
	fs.DurationVar(&ackWait, "ack-wait", 30*time.Second, "how long a task may go without an ack or progress signal before it is redelivered to another worker (running tasks signal progress every third of it); shared by the pool's workers, the last started sets it")
	cf.registerFacts(fs)
	fs.DurationVar(&cfg.FactsInterval, "facts-interval", worker.DefaultFactsInterval, "how often the facts are gathered again (never per task)")
	fs.DurationVar(&drainTimeout, "drain-timeout", 0, "on shutdown, cancel tasks still running after this long (0: wait for them)")
	assignments := true
	fs.BoolVar(&assignments, "assignments", true, "keep the assignments of this worker's pools converged (manifold assign)")
	if code, ok := parseNone(fs, st, "worker", args); !ok {
		return code
	}
	if cfg.FactsInterval <= 0 {
		fmt.Fprintln(st.Stderr, "manifold worker: --facts-interval must be more than 0")
		return ExitInvalid
	}
	cfg.Pools = pools
	cfg.DisableAssignments = !assignments
	if len(cfg.Pools) == 0 {
		cfg.Pools = []string{bus.DefaultPool}
	}
	sf.instance = cfg.Name
	log, cleanup, nc, err := sf.start(ctx, st, "worker", "manifold-worker")
	if err != nil {
		return connExit(st, "worker", err)
	}
	defer cleanup()
	b, err := attachRetry(ctx, nc, log, bus.Config{TaskAckWait: ackWait, Domain: sf.conn.domain(st.Getenv)})
	if err != nil {
		log.Error("cannot attach to the bus", "error", err)
		return ExitUnavailable
	}
	cfg.Bus, cfg.Registry, cfg.Logger, cfg.Version = b, workerRegistry(b), log, Version
	// Gathered at start, then every --facts-interval: templates and
	// `manifold workers` see them; never per task.
	cf.warn = func(err error) { log.Warn("facts: skipped", "error", err) }
	if cfg.Facts, err = cf.gatherFacts(ctx, true); err != nil {
		log.Error("cannot gather facts", "error", err)
		return ExitInvalid
	}
	cfg.GatherFacts = func(ctx context.Context) (map[string]any, error) { return cf.gatherFacts(ctx, true) }
	w, err := worker.New(cfg)
	if err != nil {
		log.Error("bad configuration", "error", err)
		return ExitInvalid
	}
	// The worker's own context must outlive the signal: cancelling it
	// would cancel running tasks instead of draining.
	if err := w.Start(context.WithoutCancel(ctx)); err != nil {
		log.Error("cannot start", "error", err)
		return ExitUnavailable
	}
	log.Info("worker started", "name", w.Name(), "pools", strings.Join(cfg.Pools, ","), "concurrency", cfg.Concurrency)
	<-ctx.Done()

	// A second signal, or the drain timeout, cancels running tasks.
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	var timeout <-chan time.Time
	if drainTimeout > 0 {
		timeout = time.After(drainTimeout)
	}
	drained := make(chan struct{})
	go func() { w.Stop(); close(drained) }()
	log.Info("draining: taking no new tasks, waiting for running ones")
	select {
	case <-drained:
	case <-again:
		log.Warn("second signal: cancelling running tasks")
		w.Kill()
	case <-timeout:
		log.Warn("drain timeout: cancelling running tasks", "drain_timeout", drainTimeout)
		w.Kill()
	}
	<-drained
	log.Info("worker stopped")
	return ExitOK
}

// attachRetry attaches to the bus, waiting for a coordinator to provision
// it.
func attachRetry(ctx context.Context, nc *nats.Conn, log *slog.Logger, cfg bus.Config) (*bus.Bus, error) {
	warned := false
	for {
		b, err := bus.Attach(ctx, nc, cfg)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, bus.ErrNotFound) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		if !warned {
			log.Warn("waiting for a coordinator to provision manifold's streams and buckets", "error", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// parseNone parses flags of a command that takes no arguments.
func parseNone(fs *flag.FlagSet, st IO, cmd string, args []string) (int, bool) {
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err), false
	}
	if len(pos) != 0 {
		fmt.Fprintf(st.Stderr, "manifold %s: unexpected argument %q\n", cmd, pos[0])
		return ExitInvalid, false
	}
	return 0, true
}

// listFlag collects a repeatable, comma-separated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

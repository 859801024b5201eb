package cli

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/compile"
	"github.com/manifold-run/manifold/internal/telemetry"
	"github.com/manifold-run/manifold/schemas"
)

const applyAbout = `Runs a manifest and waits for it to finish, printing a line per resource
that changed (with its diff) or failed as it finishes, then a recap:
created, updated, deleted, refreshed, failed, skipped and stable counts and
every failure with its whole error (or, with --output json, the run
report). --verbose prints every resource; on a terminal a [done/total]
line shows progress and colours are used unless --no-color or NO_COLOR.

With --server URL (or --context NAME) it submits the run to the
coordinators on that server instead, exactly as 'manifold run --follow'.

Without --server it starts an embedded engine in this process: a NATS
server with JetStream, a coordinator and a worker, all talking through
JetStream. Nothing listens on the network and the store is a private
temporary directory, so any number of applies can run at once.

With --watch it converges, then stays running and keeps the host
converged: a change to a managed file, directory, document, account
database or package database starts a repair run of that resource (and
the ones it refreshes), everything is re-checked every --interval, and
health checks run every --health-interval (a CRITICAL one starts a full
remediation run). It prints a line per repaired resource with what
triggered it (--output json: one report per run, one per line). With
--noop it only reports drift. SIGINT or SIGTERM finishes the run in
progress and exits 0.

Exit codes: 0 no resource failed, 1 resources failed, 2 invalid manifest or
flags, 3 could not run (bus error, timeout, interrupted). With
--detailed-exitcodes (Puppet's): 0 no changes, 2 changes, 4 failures, 6
changes and failures, 1 invalid manifest or flags, 3 could not run; so
'apply --noop --detailed-exitcodes' is a drift check (2: drift).`

type applyOpts struct {
	noop, healthCheckOnly bool
	compile               compileFlags
	output                choice
	timeout               time.Duration
	maxDepth              int
	maxTreeRuns           int
	concurrency           int
	logLevel              choice
	otlpEndpoint          string
	jaegerURL             string
	watch                 watchOpts
	view                  viewFlags
}

func runApply(ctx context.Context, st IO, args []string) (code int) {
	defer func() { code = detailedExitCode(args, code) }()
	o := applyOpts{output: choice{"text", []string{"text", "json"}},
		logLevel: choice{"error", []string{"debug", "info", "warn", "error"}}}
	fs := newFlags("apply", "[flags] MANIFEST", applyAbout, st, args)
	fs.BoolVar(&o.noop, "noop", false, "report what would change without changing anything")
	fs.BoolVar(&o.healthCheckOnly, "health-check-only", false, "run health checks only")
	fs.BoolVar(&o.healthCheckOnly, "monitor-only", false, "alias of --health-check-only (CCM's name)")
	o.compile.register(fs, "override manifest data: key=value, repeatable; values are YAML scalars, dotted keys nest (app.port=80)")
	fs.Var(&o.output, "output", "output format: text or json (the run report)")
	fs.DurationVar(&o.timeout, "timeout", time.Hour, "give up on the run after this long (exit 3)")
	fs.IntVar(&o.maxDepth, "max-depth", coordinator.DefaultMaxDepth, "maximum nesting of apply resources")
	fs.IntVar(&o.maxTreeRuns, "max-tree-runs", coordinator.DefaultMaxTreeRuns, "maximum child runs the run starts, all depths together (with --server: asked of the server's coordinator, within its policy)")
	fs.IntVar(&o.concurrency, "concurrency", 0, "resources executed at once by the embedded worker (default: CPUs)")
	fs.Var(&o.logLevel, "log-level", "log level on stderr: debug, info, warn or error")
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "export traces to this OTLP endpoint (default: OTEL_EXPORTER_OTLP_ENDPOINT; none: no export)")
	jaegerURLFlag(fs, st, &o.jaegerURL)
	fs.BoolVar(&o.watch.enabled, "watch", false, "after converging, keep running: repair drift as events show it, re-check everything every --interval (embedded engine; a fleet uses 'manifold assign')")
	fs.DurationVar(&o.watch.interval, "interval", 30*time.Minute, "with --watch: full check period (less up to 10% jitter)")
	fs.DurationVar(&o.watch.healthInterval, "health-interval", 0, "with --watch: run the health checks this often and remediate on CRITICAL (0: never)")
	fs.DurationVar(&o.watch.servicePoll, "service-poll", 5*time.Second, "with --watch: how often the systemd units of service resources are polled for drift (one 'systemctl show' for all of them; at least 1s)")
	o.view.register(fs)
	var conn connFlags // --server or --context: submit to a server, as `run --follow`
	conn.register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if o.watch.enabled && conn.explicit() {
		fmt.Fprintln(st.Stderr, "manifold apply: --watch keeps this host converged with the embedded engine; to keep a fleet converged through a server use 'manifold assign'")
		return ExitInvalid
	}
	if o.watch.enabled && (o.watch.interval < time.Second || o.watch.healthInterval < 0) {
		fmt.Fprintln(st.Stderr, "manifold apply: --interval must be at least 1s and --health-interval not negative")
		return ExitInvalid
	}
	if o.watch.enabled && o.watch.servicePoll < time.Second {
		fmt.Fprintf(st.Stderr, "manifold apply: --service-poll %s: must be at least 1s\n", o.watch.servicePoll)
		return ExitInvalid
	}
	if len(pos) != 1 {
		fmt.Fprintln(st.Stderr, "manifold apply: want exactly one MANIFEST argument")
		fs.Usage()
		return ExitInvalid
	}
	if o.maxTreeRuns < 1 {
		fmt.Fprintln(st.Stderr, "manifold apply: --max-tree-runs must be at least 1")
		return ExitInvalid
	}
	if o.maxDepth < 1 {
		fmt.Fprintln(st.Stderr, "manifold apply: --max-depth must be at least 1 (a manifest without apply resources needs no limit)")
		return ExitInvalid
	}
	if !conn.explicit() {
		// The embedded engine's policy is the coordinator's default one;
		// a server's coordinator applies its own (and says so).
		if o.maxDepth > coordinator.DefaultMaxDepthLimit || o.maxTreeRuns > coordinator.DefaultMaxTreeRunsLimit {
			fmt.Fprintf(st.Stderr, "manifold apply: --max-depth %d or --max-tree-runs %d is over the embedded engine's limit (%d and %d)\n",
				o.maxDepth, o.maxTreeRuns, coordinator.DefaultMaxDepthLimit, coordinator.DefaultMaxTreeRunsLimit)
			return ExitInvalid
		}
	}
	mark(ctx, PhaseCommand)
	path := pos[0]
	logger := newLogger(st.Stderr, o.logLevel.value)
	eopts := embeddedOpts{Logger: logger, MaxDepth: o.maxDepth, MaxTreeRuns: o.maxTreeRuns, Concurrency: o.concurrency,
		Watch: o.watch.enabled, RunTimeout: o.timeout}
	var starting *startingEngine
	if !conn.explicit() {
		// The engine starts while facts are gathered and the manifest
		// compiled; it is closed unless the run goes ahead.
		// With --watch the engine outlives the signal that stops the
		// watch: the repair in progress finishes first.
		engineCtx := ctx
		if o.watch.enabled {
			engineCtx = context.WithoutCancel(ctx)
		}
		eopts.HoldForFacts = holdEngineForFacts(path)
		starting = startEmbeddedAsync(engineCtx, eopts)
		defer func() {
			if starting != nil {
				starting.abandon()
			}
		}()
	}

	// Embedded, the worker is this host: the hierarchy is resolved over
	// its facts. Remote, over --fact only (the host of a task is not
	// known before it runs).
	if conn.explicit() {
		o.compile.kvFrom(st, &conn) // --hiera kv://
	}
	// Parsed once: the embedded coordinator runs the plan compiled here
	// (eng.plans), a server's parses in its own process, so storing the
	// parse in the cache only kept a second copy of every resource for
	// the whole run (6 MB at 20,000 files). Child manifests are parsed
	// again by the coordinator that starts their runs.
	var (
		data, facts map[string]any
		tree        *compile.Tree
		ok          bool
	)
	if starting != nil && len(o.compile.hiera) == 0 {
		// This host's facts are gathered while the manifest is read and
		// parsed, and handed to the worker (which starts with them
		// while the rest compiles) once the compile needs them: a
		// converged 2,000-file apply compiled 2 ms sooner.
		var gathered func() (map[string]any, error)
		if data, gathered, ok = o.compile.inputsLater(ctx, st, "apply", starting.factsGathered); !ok {
			return ExitInvalid
		}
		handed := false
		hand := func(f map[string]any) {
			if !handed {
				handed = true
				mark(ctx, PhaseFacts)
				starting.startWorker(f)
			}
		}
		t, err := compile.Build(path, compile.Opts{Run: data, ParseOnce: true, FactsLater: func() map[string]any {
			f, ferr := gathered()
			if ferr == nil {
				hand(f)
			}
			return f
		}})
		// As if the facts were gathered first: their error alone.
		var ferr error
		if facts, ferr = gathered(); ferr != nil {
			fmt.Fprintf(st.Stderr, "manifold apply: %v\n", ferr)
			return ExitInvalid
		}
		if tree, ok = reportTree(st, "apply", t, err); !ok {
			return ExitInvalid
		}
		hand(facts) // the compile needed none
	} else {
		if data, facts, ok = o.compile.inputs(ctx, st, "apply", !conn.explicit()); !ok {
			return ExitInvalid
		}
		if starting != nil {
			starting.factsGathered()
		}
		mark(ctx, PhaseFacts)
		if starting != nil {
			// The worker starts with this host's facts while the
			// manifest compiles.
			starting.startWorker(facts)
		}
		if conn.explicit() {
			if facts, err = o.compile.runFacts(); err != nil {
				fmt.Fprintf(st.Stderr, "manifold apply: %v\n", err)
				return ExitInvalid
			}
		}
		if tree, ok = compileTreeOpts(st, "apply", path, compile.Opts{Run: data, Facts: facts, ParseOnce: true}); !ok {
			return ExitInvalid
		}
	}
	mark(ctx, PhaseCompiled)
	// Embedded, the bundle is packed while the engine still starts.
	var req bus.RunRequest
	if !conn.explicit() {
		req = bus.RunRequest{
			RunID: coordinator.NewRunID(), Data: data, Facts: facts, Noop: o.noop, HealthCheckOnly: o.healthCheckOnly, MaxDepth: o.maxDepth,
		}
		archive, err := packBundle(&req, path, tree, true)
		if err != nil {
			fmt.Fprintf(st.Stderr, "manifold apply: %v\n", err)
			return ExitInvalid
		}
		mark(ctx, PhaseBundlePacked)
		// Stored by the engine while it starts.
		starting.storeBundle(archive)
	}
	shutdown, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "manifold-cli", Endpoint: o.otlpEndpoint})
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold apply: %v\n", err)
		return ExitInvalid
	}
	mark(ctx, PhaseTelemetry)
	defer func() {
		if err := shutdown(context.Background()); err != nil {
			logger.Warn("traces not flushed", "error", err)
		}
	}()

	if conn.explicit() {
		return submitRemote(ctx, st, &conn, remoteRun{path: path, tree: tree, follow: true, output: o.output.value, timeout: o.timeout, jaegerURL: o.jaegerURL, view: o.view,
			req: bus.RunRequest{Data: data, Facts: facts, Noop: o.noop, HealthCheckOnly: o.healthCheckOnly, MaxDepth: o.maxDepth, MaxTreeRuns: explicitInt(fs, "max-tree-runs", o.maxTreeRuns)}})
	}
	defer exitOnSecondSignal(st, "apply")()
	if !o.watch.enabled { // with --watch, --timeout bounds each run
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("run did not finish within --timeout %s", o.timeout))
		defer cancel()
	}
	eng, err := starting.wait()
	starting = nil
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold apply: %v\n", err)
		return ExitUnavailable
	}
	mark(ctx, PhaseEngineReady)
	defer func() {
		eng.closeWithin(st, embeddedStopWait)
		mark(ctx, PhaseEngineStopped)
	}()

	if err := eng.bundleErr; err != nil {
		fmt.Fprintf(st.Stderr, "manifold apply: %v\n", err)
		if ctx.Err() != nil { // a signal: could not run
			return ExitUnavailable
		}
		return ExitInvalid
	}
	req.Bundle = eng.bundle
	if o.watch.enabled {
		return runWatch(ctx, &watchRun{st: st, eng: eng, tree: tree, req: req, output: o.output.value, runTimeout: o.timeout,
			facts: facts, jaegerURL: o.jaegerURL, logger: logger}, o.watch)
	}
	// The coordinator runs the plan compiled above: same bundle, data
	// and facts, compiled once.
	// The CLI keeps nothing of the compile while the run goes: the
	// coordinator holds the plan, the store the bundle (releaseTree).
	eng.plans.put(req.RunID, tree.Plan)
	eng.reports.want(req.RunID)
	fo := followOpts{noop: req.Noop, output: o.output.value, jaegerURL: o.jaegerURL, pre: tree.Plan.PreMessage, cancelOnEnd: true,
		view: o.view, reports: &eng.reports}
	eng.events.put(req.RunID, followedKinds(st, fo))
	releaseTree(&tree)
	return submitAndFollow(ctx, st, eng.bus, req, fo)
}

// releaseTree drops the command's reference to a compiled tree once it is
// handed over: the manifest's text and files in its bundle (uploaded) and
// the plan (the coordinator's now) can be collected during the run.
func releaseTree(t **compile.Tree) { *t = nil }

// submitAndFollow submits a run on the fire-and-forget subject and follows
// it (see followRun).
func submitAndFollow(ctx context.Context, st IO, b *bus.Bus, req bus.RunRequest, fo followOpts) int {
	// The client's span: the run's trace starts here, and the run request
	// carries it to the coordinator in its traceparent header.
	ctx, span := otel.Tracer("github.com/manifold-run/manifold/cli").Start(ctx, "manifold run "+req.ManifestName,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attribute.String("manifold.run_id", req.RunID)))
	defer span.End()
	if err := b.SubmitRun(ctx, req, req.RunID); err != nil {
		fmt.Fprintf(st.Stderr, "manifold: submit run: %v\n", err)
		return ExitUnavailable
	}
	mark(ctx, PhaseRunSubmitted)
	return followRun(ctx, st, b, req.RunID, fo)
}

func flagExit(err error) int {
	if errors.Is(err, flagHelp) {
		return ExitOK
	}
	return ExitInvalid
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}

// printValidation prints validation errors, one file:line:col line each.
func printValidation(w io.Writer, err error) {
	var errs schemas.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			fmt.Fprintln(w, e.Error())
		}
		return
	}
	fmt.Fprintln(w, err.Error())
}

// explicitInt is v when the flag name was given, else 0 (the server's
// default).
func explicitInt(fs *flag.FlagSet, name string, v int) int {
	set := 0
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = v
		}
	})
	return set
}

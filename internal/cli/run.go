package cli

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/compile"
	"github.com/manifold-run/manifold/internal/telemetry"
)

const runAbout = `Submits a run of a manifest to the coordinators on a NATS server and
prints its run ID. The manifest is validated here first (exit 2 when it is
not valid), then bundled with the files it references and uploaded.

  --follow          stream a line per changed (with its diff) or failed
                    resource, then the recap (--verbose: every resource)
  --wait            wait silently, then print the recap
  --output json     wait, then print the run report

Exit codes (with --follow, --wait or --output json, as for apply): 0 no
resource failed, 1 resources failed, 2 invalid manifest or flags, 3 could
not run (no server or coordinator, timeout, cancelled, interrupted).
Without them: 0 once the run is accepted. With --detailed-exitcodes and
--follow, --wait or --output json: 0 no changes, 2 changes, 4 failures, 6
both, 1 invalid manifest or flags, 3 could not run.`

// remoteRun is a run to submit to a server and how to wait for it.
type remoteRun struct {
	path           string
	tree           *compile.Tree
	req            bus.RunRequest
	follow, wait   bool
	output         string
	timeout        time.Duration
	idempotencyKey string
	jaegerURL      string
	view           viewFlags
}

func runRun(ctx context.Context, st IO, args []string) (code int) {
	defer func() { code = detailedExitCode(args, code) }()
	var (
		conn       connFlags
		rr         remoteRun
		cf         compileFlags
		output     = choice{"text", []string{"text", "json"}}
		pool       string
		taskTO     time.Duration
		noop       bool
		hcOnly     bool
		eachWorker bool
		where      string
		answerTO   time.Duration
		maxDpth    int
		otlp       string
	)
	fs := newFlags("run", "[--server URL] [flags] MANIFEST", runAbout, st, args)
	conn.register(fs)
	fs.BoolVar(&rr.follow, "follow", false, "stream progress until the run ends")
	fs.BoolVar(&rr.wait, "wait", false, "wait for the run to end, then print the summary")
	fs.Var(&output, "output", "output format: text or json (waits, then prints the run report)")
	cf.register(fs, "override manifest data: key=value, repeatable; values are YAML scalars, dotted keys nest (app.port=80)")
	fs.BoolVar(&noop, "noop", false, "report what would change without changing anything")
	fs.BoolVar(&hcOnly, "health-check-only", false, "run health checks only")
	fs.BoolVar(&hcOnly, "monitor-only", false, "alias of --health-check-only (CCM's name)")
	fs.StringVar(&pool, "pool", "", "worker pool of resources that name no target (default: default)")
	fs.BoolVar(&eachWorker, "each-worker", false, "run the manifest once on every live worker of --pool, each as a child run pinned to that worker")
	fs.StringVar(&where, "where", "", "run on the live workers of --pool whose facts make this expression true (implies a fan-out as --each-worker), e.g. facts.role == 'db'")
	fs.DurationVar(&answerTO, "answer-timeout", coordinator.DefaultAnswerTimeout, "in a fan-out, a worker whose child run has not finished after this long is reported 'no answer' and the run fails")
	fs.StringVar(&rr.idempotencyKey, "idempotency-key", "", "the same key never starts two runs: a repeat gets the first run's ID")
	fs.DurationVar(&rr.timeout, "timeout", time.Hour, "stop waiting after this long (exit 3); the run goes on")
	fs.IntVar(&maxDpth, "max-depth", 0, "maximum nesting of apply resources (default: the coordinator's)")
	fs.DurationVar(&taskTO, "task-timeout", 0, "timeout of tasks whose resource sets none (default: the coordinator's)")
	fs.StringVar(&otlp, "otlp-endpoint", "", "export traces to this OTLP endpoint (default: OTEL_EXPORTER_OTLP_ENDPOINT; none: no export)")
	jaegerURLFlag(fs, st, &rr.jaegerURL)
	rr.view.register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(st.Stderr, "manifold run: want exactly one MANIFEST argument")
		fs.Usage()
		return ExitInvalid
	}
	if pool != "" {
		if err := bus.ValidToken(pool); err != nil {
			fmt.Fprintf(st.Stderr, "manifold run: --pool: %v\n", err)
			return ExitInvalid
		}
	}
	if maxDpth < 0 || taskTO < 0 {
		fmt.Fprintln(st.Stderr, "manifold run: --max-depth and --task-timeout must not be negative")
		return ExitInvalid
	}
	if answerTO <= 0 {
		fmt.Fprintf(st.Stderr, "manifold run: --answer-timeout %s: must be positive\n", answerTO)
		return ExitInvalid
	}
	rr.path, rr.output = pos[0], output.value
	cf.kvFrom(st, &conn) // --hiera kv://
	data, facts, ok := cf.inputs(ctx, st, "run", false)
	if !ok {
		return ExitInvalid
	}
	if facts, err = cf.runFacts(); err != nil {
		fmt.Fprintf(st.Stderr, "manifold run: %v\n", err)
		return ExitInvalid
	}
	rr.req = bus.RunRequest{Data: data, Facts: facts, Noop: noop, HealthCheckOnly: hcOnly, Pool: pool, MaxDepth: maxDpth,
		TaskTimeoutMS: taskTO.Milliseconds(), EachWorker: eachWorker, Where: where}
	if eachWorker || where != "" {
		rr.req.AnswerTimeoutMS = max(answerTO.Milliseconds(), 1)
	}
	if eachWorker || where != "" {
		// Each host is compiled with the facts it published (docs/fleet.md,
		// Per-host compile); here only what needs no facts is checked.
		if len(facts) > 0 {
			fmt.Fprintln(st.Stderr, "manifold run: warning: --fact is not used by a fan-out: each host is compiled with the facts it published")
		}
		rr.req.Facts = nil
		rr.tree, ok = compileTreeOpts(st, "run", rr.path, compile.Opts{Run: data, PerHost: true})
	} else {
		rr.tree, ok = compileTree(st, "run", rr.path, data, facts)
	}
	if !ok {
		return ExitInvalid
	}
	shutdown, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "manifold-cli", Endpoint: otlp})
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold run: %v\n", err)
		return ExitInvalid
	}
	defer func() {
		if err := shutdown(context.Background()); err != nil {
			fmt.Fprintf(st.Stderr, "manifold run: traces not flushed: %v\n", err)
		}
	}()
	return submitRemote(ctx, st, &conn, rr)
}

// submitRemote uploads the manifest's bundle, submits the run through the
// runs.submit endpoint and waits for it as rr says.
func submitRemote(ctx context.Context, st IO, conn *connFlags, rr remoteRun) int {
	ctx, cancel := context.WithTimeoutCause(ctx, rr.timeout, fmt.Errorf("run did not finish within --timeout %s", rr.timeout))
	defer cancel()
	b, err := conn.attach(ctx, st, "manifold-run")
	if err != nil {
		return connExit(st, "run", err)
	}
	defer b.Conn().Close()
	req := rr.req
	req.RunID, req.IdempotencyKey = coordinator.NewRunID(), rr.idempotencyKey
	// The client's span, as in submitAndFollow: the runs.submit request
	// carries it to the coordinator.
	ctx, span := otel.Tracer("github.com/manifold-run/manifold/cli").Start(ctx, "manifold run "+rr.path,
		trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attribute.String("manifold.run_id", req.RunID)))
	defer span.End()
	if err := uploadBundle(ctx, b, &req, rr.path, rr.tree, false); err != nil {
		fmt.Fprintf(st.Stderr, "manifold run: %v\n", err)
		return ExitInvalid // as apply: mostly a file the manifest references is missing
	}
	var reply bus.SubmitReply
	if err := callAPI(ctx, b.Conn(), bus.SubjectAPIRunsSubmit, req, &reply); err != nil {
		return apiExit(st, "run", err)
	}
	if reply.Duplicate {
		fmt.Fprintf(st.Stderr, "manifold run: idempotency key %q was used before: run %s\n", req.IdempotencyKey, reply.RunID)
	}
	if !rr.follow && !rr.wait && rr.output != "json" {
		fmt.Fprintln(st.Stdout, reply.RunID)
		return ExitOK
	}
	if rr.follow && rr.output != "json" {
		fmt.Fprintf(st.Stdout, "run %s submitted\n", reply.RunID)
	}
	fo := followOpts{noop: req.Noop, output: rr.output, quiet: !rr.follow, jaegerURL: rr.jaegerURL, view: rr.view}
	if rr.follow {
		fo.pre = rr.tree.Plan.PreMessage
	}
	return followRun(ctx, st, b, reply.RunID, fo)
}

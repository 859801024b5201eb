package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// followOpts say how followRun reports.
type followOpts struct {
	// noop words changes as "would change".
	noop bool
	// output is text or json (the run report, no progress lines).
	output string
	// quiet prints no progress lines, only the summary (text).
	quiet bool
	// jaegerURL links the trace in the summary (text).
	jaegerURL string
	// pre is the manifest's pre_message, printed first (text).
	pre string
	// cancelOnEnd cancels the run when ctx ends first (interrupted, timed
	// out): the embedded engine that drives it is about to go.
	cancelOnEnd bool
	// view says how much text output shows and whether the exit code is
	// detailed.
	view viewFlags
	// reports, when set, may hold the run's report as the embedded
	// coordinator stored it, taken rather than read back.
	reports *reportHandoff
}

// getReport reads a run's report from the bus (a variable for tests).
var getReport = coordinator.GetReport

// printedKinds are the events a progress printer without a status line
// prints or stops at (progressPrinter.event).
var printedKinds = []bus.EventKind{bus.EventTaskFinished, bus.EventRunRejected, bus.EventRunFinished}

func newProgressPrinter(st IO, o followOpts) *progressPrinter {
	return &progressPrinter{w: st.Stdout, quiet: o.quiet || o.output == "json", noop: o.noop, jaegerURL: o.jaegerURL,
		live: isTerminal(st.Stdout, st.Getenv), verbose: o.view.verbose, color: useColor(st.Stdout, st.Getenv, o.view.noColor)}
}

// kinds returns the events p reads, nil for all of them:
//   - quiet (or --output json): nothing is printed per resource, the
//     run's end is all that is needed (of the root run only);
//   - lines per finished resource (child runs' too), no status line: no
//     task_dispatched or run_started is read (one event per resource
//     fewer for the server to send and this process to decode);
//   - a live status line: every event.
func (p *progressPrinter) kinds() []bus.EventKind {
	switch {
	case p.quiet:
		return []bus.EventKind{bus.EventRunRejected, bus.EventRunFinished}
	case !p.live:
		return printedKinds
	}
	return nil
}

// followedKinds returns the event kinds followRun reads with st and o,
// nil for all.
func followedKinds(st IO, o followOpts) []bus.EventKind { return newProgressPrinter(st, o).kinds() }

// endWait bounds what followRun does after ctx ended: the cancel request
// and reading the report.
const endWait = 5 * time.Second

// followRun follows a submitted run to its end, printing progress lines
// (text, unless quiet) and then the summary or the report (json), and
// returns the exit code the report calls for: 0 succeeded, 1 resources
// failed, 2 the run was rejected as invalid, 3 anything else (cancelled,
// bus error, timeout, interrupted).
func followRun(ctx context.Context, st IO, b *bus.Bus, runID string, o followOpts) int {
	p := newProgressPrinter(st, o)
	rejected := false
	printMessage(st, o.output, o.pre)
	follow := func(ev bus.Event) bool {
		if ev.Kind == bus.EventRunRejected && ev.RunID == runID {
			rejected = true
		}
		p.event(ev)
		return !(ev.Kind == bus.EventRunFinished && ev.RunID == runID)
	}
	followEvents := func(ctx context.Context) error {
		switch kinds := p.kinds(); {
		case p.quiet:
			return b.FollowEvents(ctx, runID, follow, kinds...)
		default:
			return b.FollowTreeEvents(ctx, runID, follow, kinds...)
		}
	}
	var err error
	if ready := o.reports.handed(runID); ready != nil && o.output == "json" {
		var code int
		var printed bool
		if code, printed, err = followHanded(ctx, st, runID, o, ready, followEvents); printed {
			return code
		}
	} else {
		err = followEvents(ctx)
	}
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
		fmt.Fprintf(st.Stderr, "manifold: run %s: %v\n", runID, err)
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endWait)
		defer cancel()
		if o.cancelOnEnd && ctx.Err() != nil {
			var reply bus.CancelRunReply
			if cerr := callAPI(ectx, b.Conn(), bus.SubjectAPIRunsCancel, bus.CancelRunRequest{RunID: runID}, &reply); cerr != nil {
				fmt.Fprintf(st.Stderr, "manifold: run %s: cancel: %v\n", runID, cerr)
			}
		}
		if o.output == "json" {
			// A report even now: the run's state as far as it is known,
			// with the reason it was given up (the one handed over, which
			// is not stored, if the run ended after all).
			stored, handed := o.reports.take(runID)
			rep, rerr := stored.rep, error(nil)
			if !handed {
				rep, rerr = coordinator.GetReport(ectx, b, runID)
			}
			if rerr != nil {
				rep = &coordinator.Report{RunID: runID, Status: coordinator.RunQueued}
			}
			rep.Error = err.Error()
			_ = writeReport(st.Stdout, rep, true)
		}
		return ExitUnavailable
	}
	mark(ctx, PhaseRunFinished)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	stored, handed := o.reports.take(runID)
	rep := stored.rep
	if !handed {
		var err error
		if rep, err = getReport(rctx, b, runID); err != nil {
			fmt.Fprintf(st.Stderr, "manifold: run %s: report: %v\n", runID, err)
			return ExitUnavailable
		}
	}
	mark(ctx, PhaseReportRead)
	switch {
	case o.output == "json" && handed:
		// The stored bytes are the report's encoding (MarshalReport):
		// what writeReport would encode again from its decoded copy.
		_ = writeReportData(st.Stdout, stored.data, true)
	case o.output == "json":
		_ = writeReport(st.Stdout, rep, true)
	default:
		p.summary(rep)
		printMessage(st, o.output, rep.PostMessage)
	}
	mark(ctx, PhaseReportWritten)
	return exitFor(st, o, rep, rejected)
}

// followHanded is followRun's way with --output json when the embedded
// coordinator hands the report over: the report is printed as soon as it
// is final, while the coordinator stores it and records the run's end
// (5 of a converged 20,000-file apply's last 30 ms, which one core did
// alone), and the run_finished event is then awaited for at most
// endWait; printed says so, and code is the exit code. Otherwise (a
// rejected run, an error, the context ended, a report to read from the
// store) err is what following the events gave, and followRun goes on
// from there.
func followHanded(ctx context.Context, st IO, runID string, o followOpts, ready <-chan struct{}, followEvents func(context.Context) error) (code int, printed bool, err error) {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { done <- followEvents(fctx) }()
	select {
	case err := <-done:
		return 0, false, err
	case <-ready:
	}
	stored, handed := o.reports.take(runID)
	if !handed {
		// Not the whole report (a child's to nest, a post_message):
		// followRun reads it once the run's end is recorded.
		return 0, false, <-done
	}
	mark(ctx, PhaseRunFinished)
	mark(ctx, PhaseReportRead)
	_ = writeReportData(st.Stdout, stored.data, true)
	mark(ctx, PhaseReportWritten)
	// The run's end recorded before the engine stops (its coordinator
	// would be cancelled half way), bounded: the report is out.
	stop := time.AfterFunc(handedEndWait, func() { cancel(errEndNotRecorded) })
	defer stop.Stop()
	if err := <-done; err != nil {
		if cause := context.Cause(fctx); cause != nil {
			err = cause
		}
		fmt.Fprintf(st.Stderr, "manifold: run %s: %v\n", runID, err)
	}
	return exitFor(st, o, stored.rep, false), true, nil
}

// handedEndWait bounds the wait for a run's run_finished event after its
// handed-over report was printed (followHanded; shorter in tests).
var handedEndWait = endWait

// errEndNotRecorded: the run's report was printed but its run_finished
// event did not follow within handedEndWait.
var errEndNotRecorded = errors.New("the run's end was not recorded soon after its report was printed")

// exitFor is the exit code rep calls for (followRun).
func exitFor(st IO, o followOpts, rep *coordinator.Report, rejected bool) int {
	switch {
	case rejected:
		if o.output == "json" {
			fmt.Fprintln(st.Stderr, rep.Error)
		}
		return ExitInvalid
	case o.view.detailed && (rep.Status == coordinator.RunSucceeded || rep.Status == coordinator.RunFailed && rep.Counts.Failed > 0):
		return detailedBase + detailedExit(rep)
	case rep.Status == coordinator.RunSucceeded:
		return ExitOK
	case rep.Status == coordinator.RunFailed && rep.Counts.Failed > 0:
		return ExitFailed
	default:
		return ExitUnavailable
	}
}

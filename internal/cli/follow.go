package cli

import (
	"context"
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
	var err error
	switch kinds := p.kinds(); {
	case p.quiet:
		err = b.FollowEvents(ctx, runID, follow, kinds...)
	default:
		err = b.FollowTreeEvents(ctx, runID, follow, kinds...)
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
			// with the reason it was given up.
			rep, rerr := coordinator.GetReport(ectx, b, runID)
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

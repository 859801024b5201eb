package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/manifold-run/manifold/internal/cli"
)

// breakdown is where the wall time of one embedded `manifold apply` went,
// from the phases the process wrote (cli.TimingsEnv) and the harness's
// own start and end of the process. The parts follow one another and add
// up to the wall time; engineUp runs beside flags, facts and compile.
type breakdown struct {
	// processStart: the harness starting the process (through GNU time
	// when it measures RSS) to manifold's main: exec, the dynamic loader,
	// the Go runtime and every package's init.
	processStart time.Duration
	// compile: main to the manifest compiled (flags, facts, compile).
	compile time.Duration
	// engine: compiled to the embedded engine handed to the command (what
	// the run waited for the engine once compiled; the bundle packed
	// and tracing set up are in it).
	engine time.Duration
	// run: engine ready to the run's run_finished event (bundle stored,
	// run submitted, run).
	run time.Duration
	// report: run_finished to the report printed (read from the bus,
	// written).
	report time.Duration
	// shutdown: report printed to the command's return (engine stopped).
	shutdown time.Duration
	// exit: the command's return to the harness seeing the process end
	// (the timings file written, the process's exit).
	exit time.Duration
	// engineUp: main to the engine's worker started, side by side with
	// compile.
	engineUp time.Duration
	wall     time.Duration
}

// errTimings is the error of a timings file the harness cannot use.
var errTimings = errors.New("timings")

// parseTimings reads a timings file of an embedded apply that the
// harness started at start and saw end after wall.
func parseTimings(b []byte, start time.Time, wall time.Duration) (breakdown, error) {
	var f cli.TimingsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return breakdown{}, fmt.Errorf("%w: %w", errTimings, err)
	}
	at := map[string]time.Time{}
	for _, p := range f.Phases {
		if _, ok := at[p.Phase]; !ok {
			at[p.Phase] = time.Unix(0, p.UnixNano)
		}
	}
	need := []string{cli.PhaseMain, cli.PhaseCompiled, cli.PhaseEngineReady, cli.PhaseRunFinished, cli.PhaseReportWritten,
		cli.PhaseExit, cli.PhaseEngineWorker}
	for _, p := range need {
		if _, ok := at[p]; !ok {
			return breakdown{}, fmt.Errorf("%w: no phase %s in the file", errTimings, p)
		}
	}
	// The command's own phases are in order; the engine's worker starts
	// before the engine is handed over.
	seq := need[:6]
	for i := 1; i < len(seq); i++ {
		if at[seq[i]].Before(at[seq[i-1]]) {
			return breakdown{}, fmt.Errorf("%w: %s before %s", errTimings, seq[i], seq[i-1])
		}
	}
	end := start.Add(wall)
	if at[cli.PhaseMain].Before(start) || at[cli.PhaseExit].After(end) {
		return breakdown{}, fmt.Errorf("%w: phases from %s to %s outside the process's %s to %s", errTimings,
			at[cli.PhaseMain].Format(time.RFC3339Nano), at[cli.PhaseExit].Format(time.RFC3339Nano), start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
	}
	return breakdown{
		processStart: at[cli.PhaseMain].Sub(start),
		compile:      at[cli.PhaseCompiled].Sub(at[cli.PhaseMain]),
		engine:       at[cli.PhaseEngineReady].Sub(at[cli.PhaseCompiled]),
		run:          at[cli.PhaseRunFinished].Sub(at[cli.PhaseEngineReady]),
		report:       at[cli.PhaseReportWritten].Sub(at[cli.PhaseRunFinished]),
		shutdown:     at[cli.PhaseExit].Sub(at[cli.PhaseReportWritten]),
		exit:         end.Sub(at[cli.PhaseExit]),
		engineUp:     at[cli.PhaseEngineWorker].Sub(at[cli.PhaseMain]),
		wall:         wall,
	}, nil
}

// breakdownColumns name the parts of a breakdown, in table order.
var breakdownColumns = []struct {
	name string
	get  func(breakdown) time.Duration
}{
	{"process start", func(b breakdown) time.Duration { return b.processStart }},
	{"flags, facts, compile", func(b breakdown) time.Duration { return b.compile }},
	{"engine start (left after compile)", func(b breakdown) time.Duration { return b.engine }},
	{"run", func(b breakdown) time.Duration { return b.run }},
	{"report", func(b breakdown) time.Duration { return b.report }},
	{"shutdown", func(b breakdown) time.Duration { return b.shutdown }},
	{"exit", func(b breakdown) time.Duration { return b.exit }},
	{"wall", func(b breakdown) time.Duration { return b.wall }},
	{"engine up (beside compile)", func(b breakdown) time.Duration { return b.engineUp }},
}

// breakdownTable writes the medians of each part of bs as a Markdown
// table of one row, with its heading and what the columns mean.
func breakdownTable(w io.Writer, scenario Scenario, bs []breakdown, failed error) {
	if len(bs) == 0 {
		if failed != nil {
			fmt.Fprintf(w, "- breakdown of the %s: %s\n\n", scenario, oneLine(failed))
		}
		return
	}
	fmt.Fprintf(w, "Where the wall time of manifold's %s went (`%s=FILE`: the phases the process\n", scenario, cli.TimingsEnv)
	fmt.Fprintf(w, "marks; process start is main entered minus the harness's start of the process), median of %d\n", len(bs))
	fmt.Fprintf(w, "(the median of each part: they need not add up to the median wall):\n\n")
	fmt.Fprintf(w, "|")
	for _, c := range breakdownColumns {
		fmt.Fprintf(w, " %s |", c.name)
	}
	fmt.Fprintf(w, "\n|")
	for range breakdownColumns {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintf(w, "\n|")
	for _, c := range breakdownColumns {
		var ds []time.Duration
		for _, b := range bs {
			ds = append(ds, c.get(b))
		}
		fmt.Fprintf(w, " %s |", fmtDur(median(ds)))
	}
	fmt.Fprintf(w, "\n\n")
	if failed != nil {
		fmt.Fprintf(w, "- breakdown of the %s: %s\n\n", scenario, oneLine(failed))
	}
}

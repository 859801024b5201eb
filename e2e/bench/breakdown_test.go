package bench

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/manifold-run/manifold/internal/cli"
)

// timingsDoc is a timings file whose phases are at the given milliseconds
// after base.
func timingsDoc(t *testing.T, base time.Time, ms map[string]float64) []byte {
	t.Helper()
	f := cli.TimingsFile{Command: "apply", PID: 1}
	for name, m := range ms {
		f.Phases = append(f.Phases, cli.TimedPhase{Phase: name, UnixNano: base.Add(time.Duration(m * float64(time.Millisecond))).UnixNano()})
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseTimings(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_800_000_000, 0)
	// The process: started at 0, main at 9 ms, compiled at 20, engine
	// up at 24 (handed over at 25), run finished at 31, report written
	// at 32, exit at 34, seen ended at 36.
	phases := map[string]float64{
		cli.PhaseMain: 9, cli.PhaseCommand: 9.5, cli.PhaseFacts: 14, cli.PhaseCompiled: 20, cli.PhaseEngineWorker: 24,
		cli.PhaseEngineReady: 25, cli.PhaseRunFinished: 31, cli.PhaseReportWritten: 32, cli.PhaseEngineStopped: 33.5, cli.PhaseExit: 34,
	}
	b, err := parseTimings(timingsDoc(t, start, phases), start, 36*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	want := breakdown{processStart: 9 * ms, compile: 11 * ms, engine: 5 * ms, run: 6 * ms, report: 1 * ms, shutdown: 2 * ms,
		exit: 2 * ms, engineUp: 15 * ms, wall: 36 * ms}
	if b != want {
		t.Fatalf("got %+v\nwant %+v", b, want)
	}
	if sum := b.processStart + b.compile + b.engine + b.run + b.report + b.shutdown + b.exit; sum != b.wall {
		t.Fatalf("parts add up to %s, wall %s", sum, b.wall)
	}

	bad := func(name string, edit func(map[string]float64), wall time.Duration, why string) {
		t.Helper()
		p := map[string]float64{}
		for k, v := range phases {
			p[k] = v
		}
		edit(p)
		_, err := parseTimings(timingsDoc(t, start, p), start, wall)
		if !errors.Is(err, errTimings) || !strings.Contains(err.Error(), why) {
			t.Errorf("%s: got %v, want an error saying %q", name, err, why)
		}
	}
	bad("no run", func(p map[string]float64) { delete(p, cli.PhaseRunFinished) }, 36*ms, "no phase run_finished")
	bad("report before the run", func(p map[string]float64) { p[cli.PhaseReportWritten] = 30 }, 36*ms, "report_written before run_finished")
	bad("main before the start", func(p map[string]float64) { p[cli.PhaseMain] = -1 }, 36*ms, "outside the process")
	bad("exit after the end", func(p map[string]float64) {}, 33*ms, "outside the process")
	if _, err := parseTimings([]byte("{"), start, ms); !errors.Is(err, errTimings) {
		t.Errorf("truncated file: %v", err)
	}
}

func TestBreakdownTable(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	bs := []breakdown{
		{processStart: 9 * ms, compile: 11 * ms, engine: 5 * ms, run: 6 * ms, report: 1 * ms, shutdown: 2 * ms, exit: 2 * ms, engineUp: 15 * ms, wall: 36 * ms},
		{processStart: 7 * ms, compile: 13 * ms, engine: 1 * ms, run: 8 * ms, report: 3 * ms, shutdown: 1 * ms, exit: 1 * ms, engineUp: 14 * ms, wall: 34 * ms},
		{processStart: 8 * ms, compile: 12 * ms, engine: 3 * ms, run: 7 * ms, report: 500 * time.Microsecond, shutdown: 3 * ms, exit: 3 * ms, engineUp: 16 * ms, wall: 40 * ms},
	}
	var b strings.Builder
	breakdownTable(&b, ScenarioConverged, bs, errors.New("timings: no phase exit in the file"))
	out := b.String()
	for _, want := range []string{
		"manifold's converged apply went (`MANIFOLD_TIMINGS=FILE`",
		"median of 3",
		"| process start | flags, facts, compile | engine start (left after compile) | run | report | shutdown | exit | wall | engine up (beside compile) |\n",
		"|---|---|---|---|---|---|---|---|---|\n",
		"| 8.00 ms | 12 ms | 3.00 ms | 7.00 ms | 1.00 ms | 2.00 ms | 2.00 ms | 36 ms | 15 ms |\n",
		"- breakdown of the converged apply: timings: no phase exit in the file\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	breakdownTable(&b, ScenarioConverged, nil, nil)
	if b.Len() != 0 {
		t.Errorf("no breakdowns, no error: %q", b.String())
	}
	breakdownTable(&b, ScenarioConverged, nil, errors.New("timings: boom"))
	if got := b.String(); got != "- breakdown of the converged apply: timings: boom\n\n" {
		t.Errorf("no breakdowns: %q", got)
	}
}

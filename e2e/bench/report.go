package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// fmtDur formats a duration for a table: ms with three significant
// figures below 10 s, else seconds.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

// fmtRSS formats KiB as MiB.
func fmtRSS(kib int64) string {
	if kib <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f MiB", float64(kib)/1024)
}

// fmtRatio formats a ratio, "–" when not a number.
func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2f", r)
}

// cellText is a table cell for a tool's wall time: the median, or why
// there is none.
func cellText(c *cell) (wall, rss string) {
	if c == nil {
		return "–", "–"
	}
	if len(c.ok()) == 0 && c.err != nil {
		return failure(c.err), "–"
	}
	w, r := fmtDur(c.wall()), fmtRSS(c.rssKiB())
	if c.err != nil {
		w += " (then " + failure(c.err) + ")"
	}
	return w, r
}

// failure is a short table word for an error: timeout or failed.
func failure(err error) string {
	if strings.Contains(err.Error(), errTimeout.Error()) {
		return "**timeout**"
	}
	return "**failed**"
}

// Markdown writes the results as Markdown.
func (r *Results) Markdown(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	m := r.Machine
	p("# Benchmark results\n\n")
	p("Taken %s with commit `%s`.\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"), m.Commit)
	p("| machine | |\n|---|---|\n")
	p("| CPUs | %d (%s) |\n| memory | %s |\n| kernel | %s |\n| Go | %s |\n| load average at start | %s |\n| harness time | %s |\n\n",
		m.CPUs, m.CPUModel, m.MemTotal, m.Kernel, m.Go, m.LoadAvg, r.Took.Round(time.Second))
	p("Command:\n\n```sh\n%s\n```\n\n", r.Config.Command)
	p("manifold: built as deploy/Dockerfile builds the image's binary, `%s go build %s`.\n\n",
		strings.Join(releaseBuildEnv, " "), releaseBuildCommandFlags())
	if r.Config.CCM != "" {
		p("CCM: `%s`, whose `--version` prints `%s`.\n\n", r.Config.CCM, r.CCMVersion)
	}
	p("Every figure is the median of the repetitions given per table. Wall time (measured by the\n")
	p("harness around the process), CPU time (user and system, less distorted by a loaded machine) and\n")
	p("peak RSS (%s) are of the whole process,\n", r.RSSMethod)
	p("run as nobody:nogroup when the harness runs as root (else as the current user) with a clean\n")
	p("environment (`PATH=/usr/bin:/bin`, `HOME` a fresh directory).\n\n")
	if len(r.Files) > 0 {
		p("## Files\n\n")
		p("A CCM-format manifest of N file resources in CCM's block shape (a `defaults` entry with\n")
		p("ensure, owner, group and mode; content rendered from data with `{{ lookup('data.greeting') }}`)\n")
		p("plus one exec guarded by `creates`; the same manifest for both tools, paths apart.\n")
		p("manifold: `manifold validate M` and the embedded `manifold apply --output json M`\n")
		p("(`--noop` for noop); CCM: `ccm apply --render M` (parse, data, templates: the nearest\n")
		p("it has to validate) and `ccm apply M` (`--noop`). Ratio: the median over repetitions of\n")
		p("manifold/CCM of each pair (the two run back to back, the order alternating). Floor: a\n")
		p("plain Go loop in the harness's process doing the same lstat/read/compare and atomic write\n")
		p("(temporary file, chmod, chown, fsync, rename) per file (no process start). Converged,\n")
		p("noop and 3-file drift are measured in turns, each repetition one of each (the first of\n")
		p("them rotating), so the three meet the same moments of the machine.\n\n")
		for _, f := range r.Files {
			p("### N = %d (%d repetitions)\n\n", f.N, f.Reps)
			hasCCM := len(f.Tools) > 1
			if hasCCM {
				p("| scenario | manifold wall | manifold CPU | manifold RSS | CCM wall | CCM RSS | manifold / CCM | floor |\n|---|---|---|---|---|---|---|---|\n")
			} else {
				p("| scenario | manifold wall | manifold CPU | manifold RSS | floor |\n|---|---|---|---|---|\n")
			}
			for _, sc := range scenarios {
				mw, mr := cellText(f.cells[sc]["manifold"])
				mc := "–"
				if c := f.cells[sc]["manifold"]; c != nil && len(c.ok()) > 0 {
					mc = fmtDur(c.cpu())
				}
				fl := "–"
				if d, ok := f.floor[sc]; ok {
					fl = fmtDur(d)
				}
				if hasCCM {
					cw, cr := cellText(f.cells[sc]["CCM"])
					p("| %s | %s | %s | %s | %s | %s | %s | %s |\n", sc, mw, mc, mr, cw, cr, fmtRatio(medianFloat(f.ratios[sc])), fl)
				} else {
					p("| %s | %s | %s | %s | %s |\n", sc, mw, mc, mr, fl)
				}
			}
			p("\n")
			if f.note != "" {
				p("%s.\n\n", f.note)
			}
			for _, t := range f.Tools {
				for _, sc := range scenarios {
					if c := f.cells[sc][t]; c != nil && c.err != nil && !strings.HasPrefix(c.err.Error(), "not run") {
						p("- %s, %s: %s\n", t, sc, oneLine(c.err))
					}
				}
			}
			if f.floorErr != nil {
				p("- floor: %s\n", oneLine(f.floorErr))
			}
			p("\n")
			breakdownTable(w, breakdownScenario, f.breakdowns, f.breakdownErr)
		}
	}
	if l := r.Level; l != nil {
		p("## One apply level (%d repetitions)\n\n", l.Reps)
		p("Converged apply of a manifest holding one `apply` of a child manifest with one stable file,\n")
		p("against a converged apply of the child alone. Wall: whole process; run: the report's run time\n(manifold only).\n\n")
		p("| tool | child alone, wall | parent + child, wall | cost of the level, wall | child alone, run | parent + child, run | cost, run |\n|---|---|---|---|---|---|---|\n")
		for _, t := range l.Tools {
			if t.Err != nil && t.Child == 0 {
				p("| %s | %s | | | | | |\n", t.Name, failure(t.Err))
				continue
			}
			runCost := "–"
			if t.ChildRun > 0 && t.ParentRun > 0 {
				runCost = fmtSigned(t.ParentRun - t.ChildRun)
			}
			p("| %s | %s | %s | %s | %s | %s | %s |\n", t.Name, fmtDur(t.Child), fmtDur(t.Parent), fmtSigned(t.Parent-t.Child),
				fmtDur(t.ChildRun), fmtDur(t.ParentRun), runCost)
		}
		for _, t := range l.Tools {
			if t.Err != nil {
				p("\n- %s: %s\n", t.Name, oneLine(t.Err))
			}
		}
		p("\n")
	}
	if d := r.Dist; d != nil {
		p("## Distributed\n\n")
		p("`manifold server`, `manifold coordinator` and workers as separate processes on loopback\n")
		p("(each worker with the default concurrency, %d). Runs are submitted with\n", d.Concurrency)
		p("`manifold run --server URL --output json M` (submit, wait, print the report); no other\n")
		p("client follows their events (the latency's subscription ends before the throughput runs).\n\n")
		p("### Throughput of trivial tasks (%d repetitions)\n\n", d.Reps)
		p("`ordering: graph`, %d file resources already converged (stat, read, compare: no\n", d.N)
		p("process spawned, nothing written). tasks/s = N / run time, the run time being the report's\n")
		p("`finished_at - started_at`. The first run (creating the files, 1 worker) took %s.\n\n", fmtDur(d.First))
		p("| workers | run time | client wall | tasks/s |\n|---|---|---|---|\n")
		for _, row := range d.Rows {
			if row.Err != nil && row.RunTime == 0 {
				p("| %d | %s | | |\n", row.Workers, failure(row.Err))
				continue
			}
			p("| %d | %s | %s | %.0f |\n", row.Workers, fmtDur(row.RunTime), fmtDur(row.Wall), row.TasksPerSec)
		}
		for _, row := range d.Rows {
			if row.Err != nil {
				p("\n- %d workers: %s\n", row.Workers, oneLine(row.Err))
			}
		}
		if d.Err != nil {
			p("\n- %s\n", oneLine(d.Err))
		}
		p("\n")
		if l := d.Latency; l != nil {
			p("### Per-task latency (1 worker, %d runs)\n\n", l.Runs)
			p("A run of %d converged file resources in `ordering: graph`, each requiring the one before:\n", l.ChainN)
			p("every resource is a task message of its own (no segment), one in flight at a\n")
			p("time, so the bus is not saturated. The events give no worker-side timestamps, so the\n")
			p("overhead is measured from the coordinator's events, received by a core NATS subscription:\n")
			p("`task_finished.time - task_dispatched.time - duration_ms` (the resource's own time, whole\n")
			p("milliseconds, as the worker measured it), over %d tasks. It is the bus round trip\n", l.Tasks)
			p("(publish the task, a worker takes it, outcome back, the coordinator reads it)\n")
			p("plus the coordinator's bookkeeping between the two events.\n\n")
			p("| measure | value |\n|---|---|\n")
			p("| per-task overhead p50 | %s |\n| per-task overhead p99 | %s |\n", fmtDur(l.P50), fmtDur(l.P99))
			p("| run time / N (the whole chain, decisions included) | %s |\n", fmtDur(l.PerTask))
			p("| one-resource run: run time - resource duration | %s |\n", fmtDur(l.OneResource))
			if f := l.Floor; f != nil && f.Err == nil {
				p("| bus floor p50 / p99: bare JetStream round trip, nothing of manifold (%d trips) | %s / %s |\n", f.Trips, fmtDur(f.P50), fmtDur(f.P99))
			}
			if l.Err != nil {
				p("\n- %s\n", oneLine(l.Err))
			}
			if f := l.Floor; f != nil && f.Err != nil {
				p("\n- bus floor: %s\n", oneLine(f.Err))
			}
			if f := l.Floor; f != nil && f.Err == nil {
				p("\nThe bus floor is the round trip a chained task rides on, on the same server: a\n")
				p("process publishes a %d-byte message to a file-backed work-queue stream, another (one\n", floorTaskBytes)
				p("pull outstanding) takes it, publishes a reply to a second file-backed stream and acks it,\n")
				p("the first reads the reply with an ordered consumer and publishes two %d-byte messages\n", floorEventBytes)
				p("to a third (a task's two stored events); both are processes of the harness's own binary.\n")
			}
			p("\n")
		}
	}
	if f := r.Fleet; f != nil {
		r.fleetMarkdown(w, false)
	}
	for _, e := range r.Errors {
		p("- %s\n", oneLine(fmt.Errorf("%s", e)))
	}
}

// fleetHeading starts the fleet section of the results.
const fleetHeading = "## Fleet"

// fleetMarkdown writes the fleet section; standalone adds when, where and
// how it was taken (a fleet-only run keeps the rest of the file).
func (r *Results) fleetMarkdown(w io.Writer, standalone bool) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	f := r.Fleet
	p("%s\n\n", fleetHeading)
	if standalone {
		m := r.Machine
		p("Taken %s with commit `%s` on %d CPUs (%s), %s, load average at start %s, with\n\n```sh\n%s\n```\n\n",
			r.Started.UTC().Format("2006-01-02 15:04 MST"), m.Commit, m.CPUs, m.CPUModel, m.MemTotal, m.LoadAvg, r.Config.Command)
	}
	live := "its default"
	if f.LiveRuns > 0 {
		live = fmt.Sprint(f.LiveRuns)
	}
	consumers := "the NATS default of 1,000 consumers per stream"
	if f.MaxConsumers != 0 {
		consumers = fmt.Sprintf("JetStream `default_max_consumers: %d`", f.MaxConsumers)
	}
	p("`manifold server` (%s) and one `manifold coordinator` (`--max-tree-live-runs` %s) as separate\n", consumers, live)
	p("processes; N simulated hosts, %d per host process (`benchrun fleet-hosts`), each a\n", f.PerProcess)
	p("`worker.Worker` with its own NATS connection, name `host-NNNNN`, facts (`node`, `role`,\n")
	p("`index`), pool `fleet` and concurrency 1. A fleet run is `manifold run --each-worker --pool\n")
	p("fleet M` over a manifest of %d files whose content is rendered from the\n", f.Resources)
	if f.Executor == ExecutorMemory {
		p("host's `node` fact; executor `memory`: each host's file type keeps the contents in the\n")
		p("host process (rendered, compared, stored; no disk). %d consecutive runs per size: the\n", f.Runs)
		p("first changes every file, the others find them converged.\n")
	} else {
		p("host's `node` fact; each host writes real files under its own root (its registry's file\n")
		p("type takes every path under `host-NNNNN/`). %d consecutive runs per size: the first\n", f.Runs)
		p("creates the files (checked on every host afterwards), the others find them converged.\n")
	}
	p("Wall: from the start of `manifold run --each-worker` (submit) to the run's `run_finished`\n")
	p("event (a core NATS subscription, as a follower), median of the runs; report fetch: `manifold\n")
	p("status --output json RUN` printing the whole report (every child's), timed apart; RSS:\n")
	p("VmRSS after the run; CPU: user + system time over the run (`/proc/PID/stat`), median, per\n")
	p("host; idle CPU: over %s with every host registered, before the first run.\n\n", f.idle())
	p("| hosts | host processes | hosts start | wall (first, median, last) | run time (median) | server RSS after first / last run | server peak RSS | coordinator RSS first / last | coordinator CPU per host | server CPU per host | hosts CPU per host | report fetch | idle server / hosts CPU | load after |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range f.Rows {
		if len(row.Walls) == 0 {
			p("| %d | %d | %s | %s | | | | | | | | | | |\n", row.Hosts, row.Processes, fmtDur(row.Start), failure(row.Err))
			continue
		}
		perHost := func(ds []time.Duration) string {
			return fmt.Sprintf("%.2f ms", float64(median(ds))/float64(row.Hosts)/float64(time.Millisecond))
		}
		report := fmtDur(median(row.ReportWalls))
		if row.ReportErr != nil {
			report += " (" + failure(row.ReportErr) + ")"
		}
		p("| %d | %d | %s | %s, %s, %s | %s | %s / %s | %s | %s / %s | %s | %s | %s | %s | %s | %s |\n", row.Hosts, row.Processes, fmtDur(row.Start),
			fmtDur(row.Walls[0]), fmtDur(row.wall()), fmtDur(last(row.Walls)), fmtDur(median(row.RunTimes)),
			fmtRSS(row.ServerRSSKiB[0]), fmtRSS(last(row.ServerRSSKiB)), fmtRSS(row.ServerPeakKiB),
			fmtRSS(row.CoordRSSKiB[0]), fmtRSS(last(row.CoordRSSKiB)),
			perHost(row.CoordCPU), perHost(row.ServerCPU), perHost(row.HostsCPU), report,
			fmt.Sprintf("%.0f%% / %.0f%% of a CPU", 100*row.IdleServerCPU.Seconds()/f.idle().Seconds(), 100*row.IdleHostsCPU.Seconds()/f.idle().Seconds()), row.Load)
	}
	p("\n")
	for _, row := range f.Rows {
		if len(row.Walls) > 0 {
			p("    %s\n", row.Line(f.Resources))
		}
	}
	p("\n")
	for _, row := range f.Rows {
		if row.Err != nil {
			p("- %d hosts: %s\n", row.Hosts, oneLine(row.Err))
		}
		if row.ReportErr != nil {
			p("- %d hosts, report: %s\n", row.Hosts, oneLine(row.ReportErr))
		}
	}
	p("\n")
}

// spliceFleet returns doc with its fleet section (from fleetHeading to the
// next "## " heading or the end) replaced by section, or section appended
// when doc has none.
func spliceFleet(doc, section string) string {
	i := strings.Index(doc, "\n"+fleetHeading+"\n")
	if i < 0 {
		return strings.TrimRight(doc, "\n") + "\n\n" + section
	}
	rest := doc[i+1+len(fleetHeading):]
	end := strings.Index(rest, "\n## ")
	if end < 0 {
		return doc[:i+1] + section
	}
	return doc[:i+1] + section + rest[end+1:]
}

// fmtSigned formats a difference, which may be negative (noise).
func fmtSigned(d time.Duration) string {
	if d < 0 {
		return "-" + fmtDur(-d)
	}
	if d == 0 {
		return "0"
	}
	return fmtDur(d)
}

// oneLine flattens an error for a list item.
func oneLine(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

// WriteFile writes the Markdown to path. The results of a fleet-only run
// replace the fleet section of the file and keep the rest.
func (r *Results) WriteFile(path string) error {
	var b strings.Builder
	if r.Fleet != nil && r.Files == nil && r.Level == nil && r.Dist == nil {
		old, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("bench: %w", err)
		}
		r.fleetMarkdown(&b, true)
		if err := os.WriteFile(path, []byte(spliceFleet(string(old), b.String())), 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		return nil
	}
	r.Markdown(&b)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/facts"
	"github.com/manifold-run/manifold/worker"
)

// remoteTimeout bounds the inspection commands.
const remoteTimeout = 30 * time.Second

// remoteCmd parses the flags of an inspection command and attaches to the
// bus. It returns the positional arguments, or an exit code when done.
func remoteCmd(ctx context.Context, st IO, name, synopsis, about string, args []string, nargs int,
	more func(*flag.FlagSet)) (*bus.Bus, []string, int, bool) {
	var conn connFlags
	fs := newFlags(name, synopsis, about, st, args)
	conn.register(fs)
	if more != nil {
		more(fs)
	}
	pos, err := parse(fs, args)
	if err != nil {
		return nil, nil, flagExit(err), false
	}
	if len(pos) != nargs {
		fmt.Fprintf(st.Stderr, "manifold %s: want %d argument(s), got %d\n", name, nargs, len(pos))
		fs.Usage()
		return nil, nil, ExitInvalid, false
	}
	for _, runID := range pos { // status and cancel take a run ID
		if err := bus.ValidToken(runID); err != nil {
			fmt.Fprintf(st.Stderr, "manifold %s: run ID %v\n", name, err)
			return nil, nil, ExitInvalid, false
		}
	}
	b, err := conn.attach(ctx, st, "manifold-"+name)
	if err != nil {
		return nil, nil, connExit(st, name, err), false
	}
	return b, pos, 0, true
}

func printJSON(w io.Writer, v any) {
	if rep, ok := v.(*coordinator.Report); ok {
		_ = writeReport(w, rep, true)
		return
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeReport writes rep as a json.Encoder does (indented by two spaces
// when indent is set) and a newline: the same bytes, from the report's
// hand-written encoding rather than reflection over every resource (70 ms
// of a converged 20,000-file apply).
func writeReport(w io.Writer, rep *coordinator.Report, indent bool) error {
	data, err := coordinator.MarshalReport(rep)
	if err != nil {
		return err
	}
	return writeReportData(w, data, indent)
}

// writeReportData writes a report's encoding (MarshalReport's, here or
// in the embedded coordinator; never bytes read from the store, which are
// decoded first) as writeReport does: indented as it is written, in
// chunks (writeEncodedReport), or compact in one write.
func writeReportData(w io.Writer, data []byte, indent bool) error {
	if indent {
		return writeEncodedReport(w, data)
	}
	data = append(data[:len(data):len(data)], '\n') // never into the caller's spare capacity
	_, err := w.Write(data)
	return err
}

const statusAbout = `Prints the state of a run: its status, counts and one line per resource;
for a queued or running run, which tasks are pending and which are
dispatched to which pool. --output json prints the run report (the same
contract as apply --output json and the runs.get endpoint).
Exit 0 when the run exists, 2 when it does not, 3 on bus errors.`

func runStatus(ctx context.Context, st IO, args []string) int {
	output := choice{"text", []string{"text", "json"}}
	var jaegerURL string
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	b, pos, code, ok := remoteCmd(ctx, st, "status", "[--server URL] [--output json] RUN", statusAbout, args, 1,
		func(f *flag.FlagSet) {
			f.Var(&output, "output", "output format: text or json (the run report)")
			jaegerURLFlag(f, st, &jaegerURL)
		})
	if !ok {
		return code
	}
	defer b.Conn().Close()
	rep, err := coordinator.GetReport(ctx, b, pos[0])
	if errors.Is(err, bus.ErrNotFound) {
		fmt.Fprintf(st.Stderr, "manifold status: no run %s\n", pos[0])
		return ExitInvalid
	} else if err != nil {
		fmt.Fprintf(st.Stderr, "manifold status: %v\n", err)
		return ExitUnavailable
	}
	if output.value == "json" {
		printJSON(st.Stdout, rep)
		return ExitOK
	}
	printStatus(st.Stdout, rep, jaegerURL)
	return ExitOK
}

func printStatus(w io.Writer, rep *coordinator.Report, jaegerURL string) {
	fmt.Fprintf(w, "run %s: %s\n", rep.RunID, rep.Status)
	fmt.Fprintf(w, "manifest %s, pool %s", rep.Manifest, cmp.Or(rep.Pool, bus.DefaultPool))
	if rep.Noop {
		fmt.Fprint(w, ", noop")
	}
	fmt.Fprintln(w)
	if rep.Trigger != "" {
		fmt.Fprintf(w, "trigger %s", rep.Trigger)
		if rep.Assignment != "" {
			fmt.Fprintf(w, ", assignment %s version %d", rep.Assignment, rep.AssignmentVersion)
		}
		if rep.Offline {
			fmt.Fprintf(w, ", offline (reported by worker %s)", rep.ReportedBy)
		}
		fmt.Fprintln(w)
	}
	if rep.StartedAt != nil {
		fmt.Fprintf(w, "started %s, %s %s\n", rep.StartedAt.Local().Format(time.RFC3339),
			map[bool]string{true: "took", false: "running for"}[rep.FinishedAt != nil], fmtMS(rep.DurationMS))
	}
	c := rep.Counts
	fmt.Fprintf(w, "%d resources: %d changed, %d stable, %d failed, %d skipped\n", c.Total, c.Changed, c.Stable, c.Failed, c.Skipped)
	if rep.Error != "" {
		fmt.Fprintf(w, "error: %s\n", firstLine(rep.Error))
	}
	printTrace(w, rep.TraceID, jaegerURL)
	if len(rep.Resources) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		printResources(tw, rep.Resources, "")
		_ = tw.Flush()
	}
	if rep.Status.Final() {
		return
	}
	var pending, dispatched []string
	for _, r := range rep.Resources {
		switch r.Status {
		case string(bus.TaskPending):
			pending = append(pending, r.Ref)
		case string(bus.TaskDispatched):
			dispatched = append(dispatched, r.Ref+" (pool "+cmp.Or(r.Pool, bus.DefaultPool)+")")
		}
	}
	fmt.Fprintln(w)
	if rep.Status == coordinator.RunQueued {
		fmt.Fprintln(w, "queued: waiting for a coordinator to plan it")
	}
	fmt.Fprintf(w, "dispatched, waiting for a worker's outcome: %s\n", orNone(dispatched))
	fmt.Fprintf(w, "pending, waiting for what they depend on: %s\n", orNone(pending))
}

// printResources writes one row per resource, the resources of an apply
// resource's child run indented under it: the run tree.
func printResources(tw io.Writer, resources []coordinator.ResourceReport, indent string) {
	for _, r := range resources {
		detail := cmp.Or(r.Error, r.Message)
		detail = firstLine(strings.TrimPrefix(detail, r.Ref+": "))
		where := r.Worker
		if where == "" && r.Pool != "" && !isFinal(r.Status) {
			where = "pool " + r.Pool
		}
		fmt.Fprintf(tw, "%s\t%s%s\t%s\t%s\n", r.Status, indent, r.Ref, where, detail)
		if r.Child != nil {
			fmt.Fprintf(tw, "\t%s  run %s\t\t%s\n", indent, r.Child.RunID, r.Child.Status)
			printResources(tw, r.Child.Resources, indent+"  ")
		}
	}
}

func isFinal(status string) bool { return bus.TaskStatus(status).Final() }

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

const runsAbout = `Lists the newest runs (root runs; child runs of apply resources are in
their root run's report), newest first: run ID, status, manifest, when it
started and its counts.`

func runRuns(ctx context.Context, st IO, args []string) int {
	output := choice{"text", []string{"text", "json"}}
	limit := coordinator.DefaultListLimit
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	b, _, code, ok := remoteCmd(ctx, st, "runs", "[--server URL] [--limit N] [--output json]", runsAbout, args, 0,
		func(f *flag.FlagSet) {
			f.Var(&output, "output", "output format: text or json ({\"runs\": [...]})")
			f.IntVar(&limit, "limit", limit, "list at most this many runs")
		})
	if !ok {
		return code
	}
	defer b.Conn().Close()
	runs, err := coordinator.ListRuns(ctx, b, limit)
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold runs: %v\n", err)
		return ExitUnavailable
	}
	if output.value == "json" {
		printJSON(st.Stdout, bus.ListRunsReply{Runs: runs})
		return ExitOK
	}
	tw := tabwriter.NewWriter(st.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATUS\tMANIFEST\tTRIGGER\tSTARTED\tRESOURCES\tCHANGED\tFAILED\tSKIPPED")
	for _, r := range runs {
		started := "-"
		if r.StartedAt != nil {
			started = r.StartedAt.Local().Format("2006-01-02 15:04:05")
		}
		trigger := cmp.Or(r.Trigger, "-")
		if r.Assignment != "" {
			trigger += " (" + r.Assignment + ")"
		}
		if r.Offline {
			trigger += " offline"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", r.RunID, r.Status, r.Manifest, trigger, started,
			r.Counts.Total, r.Counts.Changed, r.Counts.Failed, r.Counts.Skipped)
	}
	_ = tw.Flush()
	return ExitOK
}

const workersAbout = `Lists the live workers (registered in the workers bucket, with a TTL
heartbeat: an entry lives 60 s and is rewritten every 20 s and when the
worker's facts, pools or assignments' states change, so a worker that died
without deregistering is listed for up to a minute; one that stopped is
gone at once): name, pools, concurrency, running tasks (as of the last
rewrite), version, when last seen, the convergence state of each assignment it keeps (name@version:
converged, repairing, drifted, flapping or failed; in json
"assignments": {name: {version, state, since, flapping, last_run,
last_trigger}}) and a facts summary.`

// workersReply is the JSON `manifold workers --output json` prints.
type workersReply struct {
	Workers []worker.Registration `json:"workers"`
}

func runWorkers(ctx context.Context, st IO, args []string) int {
	output := choice{"text", []string{"text", "json"}}
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	b, _, code, ok := remoteCmd(ctx, st, "workers", "[--server URL] [--output json]", workersAbout, args, 0,
		func(f *flag.FlagSet) { f.Var(&output, "output", "output format: text or json ({\"workers\": [...]})") })
	if !ok {
		return code
	}
	defer b.Conn().Close()
	keys, err := b.Workers().Keys(ctx)
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold workers: %v\n", err)
		return ExitUnavailable
	}
	out := workersReply{Workers: []worker.Registration{}}
	for _, k := range keys {
		e, err := b.Workers().Get(ctx, k)
		if errors.Is(err, bus.ErrNotFound) {
			continue // expired or deregistered meanwhile
		} else if err != nil {
			fmt.Fprintf(st.Stderr, "manifold workers: %v\n", err)
			return ExitUnavailable
		}
		var reg worker.Registration
		if err := json.Unmarshal(e.Value, &reg); err != nil {
			fmt.Fprintf(st.Stderr, "manifold workers: %s: unreadable registration: %v\n", k, err)
			continue
		}
		out.Workers = append(out.Workers, reg)
	}
	slices.SortFunc(out.Workers, func(a, b worker.Registration) int { return strings.Compare(a.Name, b.Name) })
	if output.value == "json" {
		printJSON(st.Stdout, out)
		return ExitOK
	}
	tw := tabwriter.NewWriter(st.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPOOLS\tCONCURRENCY\tRUNNING\tVERSION\tLAST SEEN\tASSIGNMENTS\tFACTS")
	for _, w := range out.Workers {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s ago\t%s\t%s\n", w.Name, strings.Join(w.Pools, ","), w.Concurrency,
			len(w.Running), cmp.Or(w.Version, "-"), time.Since(w.Seen).Round(time.Second), assignmentsSummary(w.Assignments), factsSummary(w.Facts))
	}
	_ = tw.Flush()
	return ExitOK
}

// factsSummary prints a few well-known facts: the host name, platform,
// architecture and CPU count (the keys of older workers too).
func factsSummary(f map[string]any) string {
	var parts []string
	for _, k := range []struct{ label, path, legacy string }{
		{"hostname", "host.info.hostname", "hostname"},
		{"os", "host.info.platform", "os"},
		{"arch", "host.info.kernelArch", "arch"},
	} {
		if v, ok := facts.Query(f, k.path); ok && v != "" {
			parts = append(parts, fmt.Sprintf("%s=%v", k.label, v))
		} else if v, ok := f[k.legacy]; ok {
			parts = append(parts, fmt.Sprintf("%s=%v", k.label, v))
		}
	}
	if v, _ := facts.Query(f, "cpu.info"); len(asList(v)) > 0 {
		parts = append(parts, fmt.Sprintf("cpus=%d", len(asList(v))))
	} else if v, ok := f["cpus"]; ok {
		parts = append(parts, fmt.Sprintf("cpus=%v", v))
	}
	return cmp.Or(strings.Join(parts, " "), "-")
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

const cancelAbout = `Cancels a run through the runs.cancel endpoint: nothing more is
dispatched, pending tasks end cancelled and the run ends cancelled (child
runs too); workers are told, on manifold.control.<run>.cancel, to stop
the run's running tasks.
Exit 0 when the run is cancelled, 1 when it had already ended otherwise,
2 when there is no such run, 3 when no coordinator answers.`

func runCancel(ctx context.Context, st IO, args []string) int {
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	b, pos, code, ok := remoteCmd(ctx, st, "cancel", "[--server URL] RUN", cancelAbout, args, 1, nil)
	if !ok {
		return code
	}
	defer b.Conn().Close()
	var reply bus.CancelRunReply
	if err := callAPI(ctx, b.Conn(), bus.SubjectAPIRunsCancel, bus.CancelRunRequest{RunID: pos[0]}, &reply); err != nil {
		return apiExit(st, "cancel", err)
	}
	fmt.Fprintf(st.Stdout, "run %s %s\n", reply.RunID, reply.Status)
	return ExitOK
}

package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/user"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/compile"
	"github.com/manifold-run/manifold/worker"
)

const assignAbout = `Stores a manifest as an assignment: desired state every live worker of
--pool, and every worker that joins it later, applies and keeps converged
with its own facts (repairs on drift events, a full check every
--interval, health checks every --health-interval with a remediation run
on CRITICAL). The manifest is validated here (--fact gives facts to check
it against), bundled with its files and uploaded as for run; assigning
again under the same NAME is a new version, rolled out at once.
Every convergence is an ordinary run (manifold runs, status) with its
trigger: assign, change, start, interval, drift or health.
Exit 0 once stored, 2 invalid manifest or flags, 3 bus errors.`

func runAssign(ctx context.Context, st IO, args []string) int {
	var (
		conn           connFlags
		cf             compileFlags
		pool, where    string
		interval, hint time.Duration
		taskTO         time.Duration
		watch, noop    bool
	)
	fs := newFlags("assign", "[--server URL] --pool NAME [--where EXPR] [--interval D] [--watch=false] [--noop] NAME MANIFEST", assignAbout, st, args)
	conn.register(fs)
	cf.register(fs, "override manifest data: key=value, repeatable; values are YAML scalars, dotted keys nest (app.port=80)")
	fs.StringVar(&pool, "pool", bus.DefaultPool, "the pool whose workers keep it converged")
	fs.StringVar(&where, "where", "", "only workers whose facts make this expression true (as a resource's control if), e.g. facts.env == 'prod'")
	fs.DurationVar(&interval, "interval", 30*time.Minute, "period of full checks")
	fs.DurationVar(&hint, "health-interval", 0, "period of health checks, with a remediation run on CRITICAL (0: none)")
	fs.BoolVar(&watch, "watch", true, "repair drift as soon as an event hints it (false: interval checks only)")
	fs.BoolVar(&noop, "noop", false, "detect and report drift, never repair it")
	fs.DurationVar(&taskTO, "task-timeout", 0, "timeout of tasks whose resource sets none (default: the coordinator's)")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 2 {
		fmt.Fprintln(st.Stderr, "manifold assign: want NAME and MANIFEST")
		fs.Usage()
		return ExitInvalid
	}
	name, path := pos[0], pos[1]
	for _, x := range []struct{ what, v string }{{"NAME", name}, {"--pool", pool}} {
		if err := bus.ValidToken(x.v); err != nil {
			fmt.Fprintf(st.Stderr, "manifold assign: %s: %v\n", x.what, err)
			return ExitInvalid
		}
	}
	if interval <= 0 || hint < 0 || taskTO < 0 {
		fmt.Fprintln(st.Stderr, "manifold assign: --interval must be more than 0; --health-interval and --task-timeout must not be negative")
		return ExitInvalid
	}
	cf.kvFrom(st, &conn)
	data, _, ok := cf.inputs(ctx, st, "assign", false)
	if !ok {
		return ExitInvalid
	}
	facts, err := cf.runFacts()
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold assign: %v\n", err)
		return ExitInvalid
	}
	// Each worker compiles the assignment with its own published facts
	// (a convergence run); here only what needs no facts is checked.
	tree, ok := compileTreeOpts(st, "assign", path, compile.Opts{Run: data, Facts: facts, PerHost: true})
	if !ok {
		return ExitInvalid
	}
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	b, err := conn.attach(ctx, st, "manifold-assign")
	if err != nil {
		return connExit(st, "assign", err)
	}
	defer b.Conn().Close()
	req := bus.RunRequest{Data: data}
	if err := uploadBundle(ctx, b, &req, path, tree, false); err != nil {
		fmt.Fprintf(st.Stderr, "manifold assign: %v\n", err)
		return ExitInvalid
	}
	a := bus.Assignment{Name: name, Bundle: req.Bundle, Entry: req.Entry, ManifestName: req.ManifestName, Pool: pool,
		Where: where, IntervalMS: interval.Milliseconds(), HealthIntervalMS: hint.Milliseconds(), Watch: watch, Noop: noop,
		Data: req.Data, DataFile: req.DataFile, TaskTimeoutMS: taskTO.Milliseconds(), CreatedAt: time.Now().UTC(), By: assignedBy()}
	v, err := b.PutAssignment(ctx, a)
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold assign: %v\n", err)
		return ExitUnavailable
	}
	fmt.Fprintf(st.Stdout, "assignment %s version %d: pool %s, %d resources\n", name, v, pool, len(tree.Plan.Manifest.Resources))
	return ExitOK
}

// assignedBy is user@host, informative.
func assignedBy() string {
	host, _ := os.Hostname()
	name := "?"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return name + "@" + cmp.Or(host, "?")
}

const assignmentsAbout = `Lists the assignments with their versions: pool, where, watch, noop,
intervals, manifest and bundle. --output json prints {"assignments": [...]}.
Exit 0, 3 on bus errors.`

// assignmentsReply is the JSON `manifold assignments --output json` prints.
type assignmentsReply struct {
	Assignments []bus.Assignment `json:"assignments"`
}

func runAssignments(ctx context.Context, st IO, args []string) int {
	output := choice{"text", []string{"text", "json"}}
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	b, _, code, ok := remoteCmd(ctx, st, "assignments", "[--server URL] [--output json]", assignmentsAbout, args, 0,
		func(f *flag.FlagSet) { f.Var(&output, "output", "output format: text or json") })
	if !ok {
		return code
	}
	defer b.Conn().Close()
	list, err := b.ListAssignments(ctx)
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold assignments: %v\n", err)
		return ExitUnavailable
	}
	if output.value == "json" {
		printJSON(st.Stdout, assignmentsReply{Assignments: list})
		return ExitOK
	}
	tw := tabwriter.NewWriter(st.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tPOOL\tWHERE\tWATCH\tNOOP\tINTERVAL\tMANIFEST\tASSIGNED")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%t\t%t\t%s\t%s\t%s by %s\n", a.Name, a.Version, a.Pool, cmp.Or(a.Where, "-"), a.Watch, a.Noop,
			time.Duration(a.IntervalMS)*time.Millisecond, cmp.Or(a.ManifestName, a.Entry), a.CreatedAt.Format(time.RFC3339), cmp.Or(a.By, "?"))
	}
	_ = tw.Flush()
	return ExitOK
}

const unassignAbout = `Removes an assignment: workers stop watching and re-applying it.
Nothing it applied is undone. Exit 0 once removed, 2 when there is no
such assignment, 3 on bus errors.`

func runUnassign(ctx context.Context, st IO, args []string) int {
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	b, pos, code, ok := remoteCmd(ctx, st, "unassign", "[--server URL] NAME", unassignAbout, args, 1, nil)
	if !ok {
		return code
	}
	defer b.Conn().Close()
	if err := b.DeleteAssignment(ctx, pos[0]); errors.Is(err, bus.ErrNotFound) {
		fmt.Fprintf(st.Stderr, "manifold unassign: no assignment %s\n", pos[0])
		return ExitInvalid
	} else if err != nil {
		fmt.Fprintf(st.Stderr, "manifold unassign: %v\n", err)
		return ExitUnavailable
	}
	fmt.Fprintf(st.Stdout, "unassigned %s: no longer kept converged (nothing on disk is undone)\n", pos[0])
	return ExitOK
}

// assignmentsSummary is the ASSIGNMENTS column of `manifold workers`:
// name@version:state each, flapping resources counted.
func assignmentsSummary(m map[string]worker.AssignmentStatus) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		s := m[name]
		p := fmt.Sprintf("%s@%d:%s", name, s.Version, s.State)
		if len(s.Flapping) > 0 {
			p += fmt.Sprintf("(%d flapping)", len(s.Flapping))
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ",")
}

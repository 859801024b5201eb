package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// ANSI colours of the text output (see useColor).
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

// useColor reports whether text output to w is coloured: w is a terminal
// (isTerminal: not TERM=dumb), --no-color was not given and NO_COLOR is
// unset or empty (https://no-color.org).
func useColor(w io.Writer, getenv func(string) string, noColor bool) bool {
	if noColor {
		return false
	}
	if getenv == nil {
		return false
	}
	return getenv("NO_COLOR") == "" && isTerminal(w, getenv)
}

// paint wraps s in colour c when the printer colours.
func (p *progressPrinter) paint(c, s string) string { return paint(p.color, c, s) }

func paint(on bool, c, s string) string {
	if !on || c == "" {
		return s
	}
	return c + s + ansiReset
}

// statusColor is the colour of a resource status.
func statusColor(s bus.TaskStatus) string {
	switch s {
	case bus.TaskChanged:
		return ansiYellow
	case bus.TaskFailed:
		return ansiRed
	case bus.TaskSkipped, bus.TaskCancelled:
		return ansiCyan
	}
	return ""
}

// writeDiff prints a diff under its resource, every line indented:
// added lines green, removed red, hunk marks cyan, file headers bold.
func writeDiff(w io.Writer, diff, indent string, color bool) {
	for line := range strings.SplitSeq(strings.TrimRight(diff, "\n"), "\n") {
		c := ""
		switch {
		case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"):
			c = ansiBold
		case strings.HasPrefix(line, "+"):
			c = ansiGreen
		case strings.HasPrefix(line, "-"):
			c = ansiRed
		case strings.HasPrefix(line, "@@"), strings.HasPrefix(line, "[manifold:"):
			c = ansiCyan
		}
		fmt.Fprintf(w, "%s%s\n", indent, paint(color, c, line))
	}
}

// recap sums a run tree's resources for the recap: changed resources by
// what the change was, and the failures with their full error.
type recap struct {
	created, updated, deleted, refreshed int
	failed, skipped, stable              int
	// failures are the failed resources, the tree's order.
	failures []recapFailure
}

// changed is how many resources changed (or, in noop, would change).
func (r recap) changed() int { return r.created + r.updated + r.deleted + r.refreshed }

type recapFailure struct {
	// where is "" for the root run, else the chain of apply resources
	// ("sub.yaml > db.yaml").
	where, ref, err string
}

// recapOf walks rep and its child reports. An apply resource whose child
// report is there is counted through its child's resources, not itself.
func recapOf(rep *coordinator.Report) recap {
	var r recap
	r.add(rep, "", 0)
	return r
}

func (r *recap) add(rep *coordinator.Report, where string, depth int) {
	if rep == nil || depth > 64 {
		return
	}
	for _, res := range rep.Resources {
		if res.Child != nil && res.Status != string(bus.TaskFailed) {
			r.add(res.Child, strings.TrimPrefix(where+" > "+res.Name, " > "), depth+1)
			continue
		}
		switch bus.TaskStatus(res.Status) {
		case bus.TaskChanged:
			switch changeKind(res) {
			case "created":
				r.created++
			case "deleted":
				r.deleted++
			case "refreshed":
				r.refreshed++
			default:
				r.updated++
			}
		case bus.TaskStable:
			r.stable++
		case bus.TaskSkipped, bus.TaskCancelled:
			r.skipped++
		case bus.TaskFailed:
			r.failed++
			r.failures = append(r.failures, recapFailure{where: where, ref: res.Ref, err: failureText(res)})
		default:
			if res.Status == "no answer" {
				r.failed++
				r.failures = append(r.failures, recapFailure{where: where, ref: res.Ref, err: failureText(res)})
			}
		}
	}
}

// changeKind classifies a change by its message's first word (types word
// their messages as verb phrases, "would " in noop): created ("create",
// "install"), deleted ("remove", "delete", "purge", "uninstall"),
// refreshed (a refresh made it act), else updated.
func changeKind(res coordinator.ResourceReport) string {
	verb, _, _ := strings.Cut(strings.TrimPrefix(res.Message, "would "), " ")
	verb = strings.TrimSuffix(verb, ",")
	switch verb {
	case "create", "created", "install", "installed":
		return "created"
	case "remove", "removed", "delete", "deleted", "purge", "purged", "uninstall", "uninstalled":
		return "deleted"
	}
	if res.Refreshed {
		return "refreshed"
	}
	return "updated"
}

// failureText is a failed resource's whole error (a command's output
// included), without the "type#name: " its errors start with.
func failureText(res coordinator.ResourceReport) string {
	s := res.Error
	if s == "" {
		s = res.Message
	}
	return strings.TrimSpace(strings.TrimPrefix(s, res.Ref+": "))
}

// printRecap prints the recap of rep: one line of counts and then every
// failure with its full error, each line of it indented.
func printRecap(w io.Writer, rep *coordinator.Report, color bool) {
	r := recapOf(rep)
	verbs := [4]string{"created", "updated", "deleted", "refreshed"}
	if rep.Noop {
		verbs = [4]string{"to create", "to update", "to delete", "to refresh"}
	}
	fmt.Fprintf(w, "recap: %d %s, %d %s, %d %s, %d %s, %s, %d skipped, %d stable\n",
		r.created, verbs[0], r.updated, verbs[1], r.deleted, verbs[2], r.refreshed, verbs[3],
		paint(color && r.failed > 0, ansiRed, fmt.Sprintf("%d failed", r.failed)), r.skipped, r.stable)
	if len(r.failures) == 0 {
		return
	}
	fmt.Fprintln(w, "failures:")
	for _, f := range r.failures {
		ref := f.ref
		if f.where != "" {
			ref = "[" + f.where + "] " + ref
		}
		fmt.Fprintf(w, "  %s\n", paint(color, ansiRed, ref))
		for line := range strings.SplitSeq(f.err, "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
}

// Exit codes of --detailed-exitcodes (Puppet's): bit 2 "changes", bit 4
// "failures"; 0 is a run that changed nothing and failed nothing.
const (
	ExitDetailedChanges  = 2
	ExitDetailedFailures = 4
)

// detailedExit maps a finished run's report to --detailed-exitcodes: 0
// nothing changed, 2 changes (in noop: drift), 4 failures, 6 both.
func detailedExit(rep *coordinator.Report) int {
	r := recapOf(rep)
	code := 0
	if r.changed() > 0 {
		code |= ExitDetailedChanges
	}
	if r.failed > 0 || rep.Counts.Failed > 0 {
		code |= ExitDetailedFailures
	}
	return code
}

// hasFlag reports whether args give the boolean flag name (-name,
// --name, --name=true) before the end of the flags: a flag error is exit
// 2, or 1 with --detailed-exitcodes (2 means changes there), and the
// flag set stops reading at the error.
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, name); ok && (v == "" || slices.Contains([]string{"=true", "=1", "=t", "=T", "=TRUE", "=True"}, v)) {
			return true
		}
	}
	return false
}

// detailedBase marks an exit code followRun computed under
// --detailed-exitcodes (detailedBase + 0, 2, 4 or 6), so that
// detailedExitCode can tell a run's "changes" (2) from invalid input (2).
const detailedBase = 100

// detailedExitCode is the process exit code of a command that took
// --detailed-exitcodes (per args): a run's detailed code as followRun
// computed it; invalid input, otherwise exit 2, becomes 1 (2 means
// changes); 3 stays 3.
func detailedExitCode(args []string, code int) int {
	switch {
	case code >= detailedBase:
		return code - detailedBase
	case code == ExitInvalid && hasFlag(args, "detailed-exitcodes"):
		return ExitFailed
	}
	return code
}

// viewFlags are the flags of apply and run that shape the text output
// and the exit code.
type viewFlags struct {
	verbose, noColor, detailed bool
}

func (v *viewFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&v.verbose, "verbose", false, "print a line for every resource, stable ones too (default: changes, failures and skips)")
	fs.BoolVar(&v.noColor, "no-color", false, "no ANSI colours in text output (also: NO_COLOR set to anything but empty; colours are only ever used on a terminal)")
	fs.BoolVar(&v.detailed, "detailed-exitcodes", false, "exit 0 no changes, 2 changes (with --noop: drift), 4 failures, 6 changes and failures; 1 invalid input, 3 could not run")
}

// Package cli is the manifold command line: commands, flags, output and exit
// codes. cmd/manifold only wires it to the process.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Exit codes, a contract scripts depend on.
const (
	// ExitOK: the run finished with no failed resource (or the command
	// succeeded).
	ExitOK = 0
	// ExitFailed: the run finished with failed resources.
	ExitFailed = 1
	// ExitInvalid: invalid input: a manifest that does not validate, bad
	// flags or arguments.
	ExitInvalid = 2
	// ExitUnavailable: the run could not be carried out: bus error, timeout,
	// interrupted.
	ExitUnavailable = 3
)

// Version is the build's version, set by the linker.
var Version = "dev"

// IO is where a command reads and writes.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv defaults to os.Getenv.
	Getenv func(string) string
	// ProcessExits says the process ends when the command returns
	// (cmd/manifold): the embedded engine of a finished apply is then
	// not shut down (its server's streams deleted, the server stopped),
	// since the exit ends it; its worker and coordinator are still
	// stopped and its store removed. Tests that run commands in process
	// leave it false.
	ProcessExits bool
	// MainEntered is when the process's main began (cmd/manifold): the
	// first phase of a TimingsEnv file. Zero leaves it out.
	MainEntered time.Time
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, st IO, args []string) int
}

func commands() []command {
	return []command{
		{"apply", "run a manifest and wait for it (embedded engine by default)", runApply},
		{"ensure", "manage one resource ad hoc (CCM's 'ccm ensure'): TYPE NAME --prop value", runEnsure},
		{"run", "submit a run to a server; --follow to stream its progress", runRun},
		{"status", "print the state of a run", runStatus},
		{"runs", "list the newest runs", runRuns},
		{"cancel", "cancel a run", runCancel},
		{"workers", "list the live workers", runWorkers},
		{"fleet", "list the hosts: pools, facts, convergence state, drifts, last run; filterable", runFleet},
		{"assign", "store desired state the workers of a pool keep converged", runAssign},
		{"assignments", "list the assignments with their versions", runAssignments},
		{"unassign", "stop keeping an assignment converged (nothing is undone)", runUnassign},
		{"server", "run a standalone NATS server with JetStream", runServer},
		{"coordinator", "run a coordinator (plans and drives runs, serves the API)", runCoordinator},
		{"worker", "run a worker (executes tasks of its pools)", runWorker},
		{"validate", "check a manifest against the schemas without running it", runValidate},
		{"render", "print a manifest in the normalised flat form", runRender},
		{"graph", "print a manifest's resource graph (DOT, Mermaid or SVG), coloured by a run", runGraph},
		{"ui", "serve a read-only web view of the fleet and its runs (loopback by default)", runUI},
		{"facts", "print this host's facts (JSON), or one of them", runFacts},
		{"schema", "print the CUE schemas manifests are checked against", runSchema},
		{"version", "print the version", runVersion},
	}
}

// Run executes the command line args (without the program name) and
// returns the process exit code.
//
// A panic of the command's goroutine (a bug) is reported with its stack
// and exits ExitUnavailable, never ExitInvalid: 2 means an invalid
// manifest, and Go's own exit status of a crash is 2 too.
func Run(ctx context.Context, st IO, args []string) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(st.Stderr, "manifold: internal error (a bug; please report it): %v\n%s", r, debug.Stack())
			code = ExitUnavailable
		}
	}()
	if st.Getenv == nil {
		st.Getenv = os.Getenv
	}
	if len(args) == 0 {
		usage(st.Stderr)
		return ExitInvalid
	}
	name := args[0]
	if path := st.Getenv(TimingsEnv); path != "" && timingsOf(ctx) == nil {
		// The file is written once the command has returned (its
		// engine stopped), whatever it returns.
		var t *timings
		ctx, t = withTimings(ctx, path, st.MainEntered)
		defer func() {
			if err := t.write(name); err != nil {
				fmt.Fprintf(st.Stderr, "manifold: %v\n", err)
			}
		}()
	}
	switch name {
	case "-h", "--help", "help":
		if len(args) > 1 {
			return Run(ctx, st, []string{args[1], "--help"})
		}
		usage(st.Stdout)
		return ExitOK
	case "--version":
		name = "version"
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, st, args[1:])
		}
	}
	fmt.Fprintf(st.Stderr, "manifold: unknown command %q\n\n", name)
	usage(st.Stderr)
	return ExitInvalid
}

func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("manifold: distributed configuration management on NATS JetStream\n\nUsage:\n  manifold <command> [flags] [arguments]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-12s %s\n", c.name, c.summary)
	}
	b.WriteString(`
Run 'manifold <command> --help' for a command's flags.

Exit codes: 0 no resource failed, 1 resources failed, 2 invalid input,
3 could not run (bus error, timeout, interrupted).
`)
	io.WriteString(w, b.String())
}

// usageError is bad command-line input: exit 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func isUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u)
}

func runVersion(_ context.Context, st IO, args []string) int {
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(st.Stdout, "manifold", versionOf(Version, bi))
	return ExitOK
}

// pseudoVersion matches a Go pseudo-version's time and revision.
var pseudoVersion = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[-.]\d{14}-[0-9a-f]{12}(\+|$)`) })

// versionOf is the version `manifold version` prints: the linker's
// Version when set, else the module's version (go install
// module@version), followed by the VCS revision and commit time the Go
// toolchain stamps into a build from a checkout ("+modified" when the
// checkout had uncommitted changes), and the Go version.
func versionOf(linked string, bi *debug.BuildInfo) string {
	v := linked
	if bi == nil {
		return v
	}
	// A pseudo-version (v0.0.0-20260102150405-abcdef123456+dirty) only
	// repeats the revision and time printed below.
	if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" && !pseudoVersion().MatchString(bi.Main.Version) {
		v = bi.Main.Version
	}
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	var parts []string
	if rev != "" {
		parts = append(parts, "revision "+rev+modified)
	}
	if at != "" {
		parts = append(parts, at)
	}
	if bi.GoVersion != "" {
		parts = append(parts, bi.GoVersion)
	}
	if len(parts) > 0 {
		v += " (" + strings.Join(parts, ", ") + ")"
	}
	return v
}

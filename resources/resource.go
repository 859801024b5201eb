package resources

import (
	"context"
	"io"
	"log/slog"
)

// Resource is the contract every resource type implements (mgmt's
// CheckApply). The engine (Execute) drives it: check, stop in noop, apply,
// re-check.
type Resource interface {
	// Validate checks the properties only; it never touches the system.
	Validate() error
	// CheckApply converges the resource in one call. With apply false it only
	// reports whether it would change (and how, in Result). An error means
	// the resource failed.
	CheckApply(ctx context.Context, env *Env, apply bool) (Result, error)
}

// Refresher is implemented by types that act when a resource they subscribe
// to changed (exec with refreshonly, service restart). The engine sets
// Env.Refresh; types that do not implement Refresher ignore refreshes.
type Refresher interface {
	Resource
	// Refreshable reports whether a refresh makes this resource act.
	Refreshable() bool
}

// Rechecker lets a type opt out of the engine's re-check after apply. Types
// whose check cannot observe the effect of apply (a command with no creates
// guard) return false; the default, for types that do not implement it, is
// to re-check.
type Rechecker interface {
	Recheck() bool
}

// Result is what CheckApply reports.
type Result struct {
	// Changed is true when the resource changed (or, in noop, would change).
	Changed bool
	// Message is a short human description ("created", "content differs").
	Message string
	// Diff optionally shows what differs.
	Diff string
}

// Env is what the engine gives a resource for one execution. It is built per
// task and never shared between tasks.
type Env struct {
	// Refresh is true when a resource this one subscribes to changed.
	Refresh bool
	// Noop is the run's noop mode (CheckApply receives apply=false then).
	Noop bool
	// WorkDir is the directory relative paths resolve against; empty means
	// the process's working directory.
	WorkDir string
	// Root is the directory relative paths must not leave (the manifest
	// bundle's root; a child manifest's sources may reach its parent's
	// files in the bundle). Empty means WorkDir.
	Root string
	// Runner runs system commands; tests replace it with recorded outputs.
	Runner CommandRunner
	// Logger carries run, resource and manifest attributes.
	Logger *slog.Logger
	// HealthChecks run after the resource, in Execute (see
	// ParseHealthChecks).
	HealthChecks []HealthCheck
	// HealthCheckOnly makes Execute run only the health checks: the
	// resource is neither checked nor applied.
	HealthCheckOnly bool
	// Facts are the host's facts in CCM's shape (facts.host.info.platformFamily
	// is Facts["host"]["info"]["platformFamily"]); the worker fills them.
	// Providers read them to say whether they can manage the host (see
	// FactString). Nil means unknown.
	Facts map[string]any
	// Data is the run's data (what templates see as Data); nil means none.
	Data map[string]any
	// Environ is the worker's process environment (what templates see as
	// Environ); nil means none.
	Environ map[string]string
	// State is the host's state store (last-applied documents); nil means
	// the type falls back to its own (document: files under the state
	// directory).
	State StateStore
	// Assume is, in noop, what other resources of the run would have
	// created before this one (see Assumed); read it with Env.Assumed.
	Assume *Assumed
}

// CommandRunner runs a system command. Implementations must honour ctx
// cancellation by killing the process (and its process group).
type CommandRunner interface {
	Run(ctx context.Context, cmd Command) (CommandResult, error)
}

// Command is one command to run.
type Command struct {
	// Argv is the program and its arguments (posix provider); for the shell
	// provider it is {"/bin/sh", "-c", line}.
	Argv []string
	// Dir is the working directory; empty means inherit.
	Dir string
	// Env is extra environment in KEY=VALUE form, added to the process's.
	Env []string
	// Path, when set, replaces PATH.
	Path string
	// Stdin optionally feeds the command.
	Stdin io.Reader
}

// CommandResult is what a finished command produced.
type CommandResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
}

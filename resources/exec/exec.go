package exec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/manifold-run/manifold/resources"
)

// Type is the resource type name, as written in manifests.
const Type = "exec"

// Provider selects how a command line is run.
type Provider string

const (
	// ProviderPosix splits the command line with SplitCommand and runs the
	// program directly. It is the default.
	ProviderPosix Provider = "posix"
	// ProviderShell runs the command line with /bin/sh -c.
	ProviderShell Provider = "shell"
)

// Properties are the exec type's properties (CCM's names).
type Properties struct {
	// Command is the command line; empty means the resource's name.
	Command string `json:"command"`
	// Cwd is the working directory; empty means Env.WorkDir. A relative Cwd
	// resolves against Env.WorkDir.
	Cwd string `json:"cwd"`
	// Environment is extra environment in KEY=VALUE form.
	Environment []string `json:"environment"`
	// Path, when set, replaces PATH for the command and its program lookup.
	Path string `json:"path"`
	// Returns lists the exit codes that mean success. Defaults to [0].
	Returns []int `json:"returns"`
	// Creates is a path; when it exists the command does not run. A relative
	// path resolves against the command's working directory.
	Creates string `json:"creates"`
	// OnlyIf is a command; the command runs only when it exits 0.
	OnlyIf string `json:"onlyif"`
	// Unless is a command; the command runs only when it exits non-zero.
	Unless string `json:"unless"`
	// RefreshOnly makes the command run only on refresh (when a resource
	// it subscribes to changed).
	RefreshOnly bool `json:"refreshonly"`
	// LogOutput puts the command's output in the result message.
	LogOutput bool `json:"logoutput"`
}

// Exec is an exec resource. Build it with New.
type Exec struct {
	name     string
	ensure   string
	provider Provider
	props    Properties
}

var (
	_ resources.Resource  = (*Exec)(nil)
	_ resources.Refresher = (*Exec)(nil)
	_ resources.Rechecker = (*Exec)(nil)
	_ resources.Factory   = New
)

// New is the exec type's resources.Factory. It decodes spec's properties;
// it does not validate them (the registry calls Validate) and does not touch
// the system.
func New(spec resources.Spec) (resources.Resource, error) {
	e := &Exec{name: spec.Name, ensure: spec.Ensure, provider: Provider(spec.Provider)}
	if err := resources.DecodeProperties(spec.Properties, &e.props); err != nil {
		return nil, err
	}
	if e.props.Command == "" {
		e.props.Command = e.name
	}
	if e.props.Returns == nil {
		e.props.Returns = []int{0}
	}
	if e.provider == "" {
		e.provider = ProviderPosix
	}
	return e, nil
}

// Properties returns the decoded properties with defaults filled in.
func (e *Exec) Properties() Properties { return e.props }

// Validate checks the properties: a non-empty command that parses (posix),
// guards that parse, a non-empty returns, KEY=VALUE environment entries and
// a known provider. It does not touch the system.
func (e *Exec) Validate() error {
	if e.ensure != "" && e.ensure != "present" {
		return fmt.Errorf("ensure %q: exec supports only present", e.ensure)
	}
	switch e.provider {
	case ProviderPosix, ProviderShell:
	default:
		return fmt.Errorf("provider %q: want %s or %s", e.provider, ProviderPosix, ProviderShell)
	}
	if strings.TrimSpace(e.props.Command) == "" {
		return errors.New("property \"command\": empty command")
	}
	for _, c := range []struct{ prop, line string }{
		{"command", e.props.Command}, {"onlyif", e.props.OnlyIf}, {"unless", e.props.Unless},
	} {
		if c.line == "" {
			continue
		}
		argv, err := e.argv(c.line)
		if err != nil {
			return fmt.Errorf("property %q: %w", c.prop, err)
		}
		if len(argv) == 0 {
			return fmt.Errorf("property %q: empty command", c.prop)
		}
	}
	if len(e.props.Returns) == 0 {
		return errors.New("property \"returns\": empty list; leave it out for [0]")
	}
	for _, kv := range e.props.Environment {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("property \"environment\": %q is not KEY=VALUE", kv)
		}
	}
	return nil
}

// Refreshable reports true: a refresh makes the command run even when check
// said it would not (refreshonly commands are the usual case). Creates,
// onlyif and unless still apply on refresh.
func (e *Exec) Refreshable() bool { return true }

// Recheck reports whether the engine should re-check after running the
// command: only when creates is set, so that the engine confirms the command
// created it. Otherwise a second check would just run the guards again.
func (e *Exec) Recheck() bool { return e.props.Creates != "" }

// CheckApply decides whether the command runs and, with apply true, runs it.
//
// A refresh (env.Refresh) always runs the command, whatever creates and the
// guards say. Otherwise it reports not changed when refreshonly is set, when
// creates exists (the guards are then not run), when onlyif exits non-zero
// or when unless exits 0; the guards run in check, and so in noop, too, with
// the same ctx, and must be read-only.
// Otherwise check reports "run <command>" (the engine adds "would" in noop) and apply runs the command through
// env.Runner (resources.OSRunner when nil), blocking until it exits or ctx
// ends (the command's process group is killed then). An exit code not in
// returns gives an *ExitError; a command that cannot start, or ctx ending,
// gives the runner's error.
func (e *Exec) CheckApply(ctx context.Context, env *resources.Env, apply bool) (resources.Result, error) {
	if env == nil {
		env = &resources.Env{}
	}
	runner := env.Runner
	if runner == nil {
		runner = resources.OSRunner{}
	}
	dir := e.dir(env)

	switch {
	case env.Refresh:
		// A refresh beats creates and the guards (CCM: "subscribe-triggered
		// refreshes override all guards").
	case e.props.RefreshOnly:
		return resources.Result{Message: "refreshonly: waiting for a refresh"}, nil
	default:
		if skip, why, err := e.guarded(ctx, runner, dir); err != nil || skip {
			return resources.Result{Message: why}, err
		}
	}

	if !apply {
		return resources.Result{Changed: true, Message: "run " + e.props.Command}, nil
	}
	res, err := e.run(ctx, runner, dir, e.props.Command)
	if err != nil {
		return resources.Result{}, err
	}
	if !slices.Contains(e.props.Returns, res.ExitCode) {
		return resources.Result{}, &ExitError{
			Command:  e.props.Command,
			ExitCode: res.ExitCode,
			Returns:  slices.Clone(e.props.Returns),
			Stdout:   boundOutput(string(res.Stdout)),
			Stderr:   boundOutput(string(res.Stderr)),
		}
	}
	msg := "ran " + e.props.Command
	if res.ExitCode != 0 {
		msg += fmt.Sprintf(" (exit code %d)", res.ExitCode)
	}
	if e.props.LogOutput {
		if out := boundOutput(strings.TrimRight(string(res.Stdout)+string(res.Stderr), "\n")); out != "" {
			msg += "\n" + out
			if env.Logger != nil {
				env.Logger.Info("command output", "command", e.props.Command, "output", out)
			}
		}
	}
	return resources.Result{Changed: true, Message: msg}, nil
}

// guarded evaluates creates, then onlyif, then unless: skip is true (with
// the reason) when one says the command need not run. Creates beats the
// guards: when it exists they are not run.
func (e *Exec) guarded(ctx context.Context, runner resources.CommandRunner, dir string) (skip bool, why string, err error) {
	if c := e.props.Creates; c != "" {
		p := c
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		_, err := os.Lstat(p)
		switch {
		case err == nil:
			return true, fmt.Sprintf("creates %s exists", c), nil
		case !errors.Is(err, fs.ErrNotExist):
			return false, "", fmt.Errorf("creates %s: %w", c, err)
		}
	}
	if g := e.props.OnlyIf; g != "" {
		res, err := e.run(ctx, runner, dir, g)
		if err != nil {
			return false, "", fmt.Errorf("onlyif: %w", err)
		}
		if res.ExitCode != 0 {
			return true, fmt.Sprintf("onlyif %s exited %d", g, res.ExitCode), nil
		}
	}
	if g := e.props.Unless; g != "" {
		res, err := e.run(ctx, runner, dir, g)
		if err != nil {
			return false, "", fmt.Errorf("unless: %w", err)
		}
		if res.ExitCode == 0 {
			return true, fmt.Sprintf("unless %s exited 0", g), nil
		}
	}
	return false, "", nil
}

// dir is the working directory commands run in: Cwd resolved against
// env.WorkDir, or env.WorkDir.
func (e *Exec) dir(env *resources.Env) string {
	switch {
	case e.props.Cwd == "":
		return env.WorkDir
	case filepath.IsAbs(e.props.Cwd) || env.WorkDir == "":
		return e.props.Cwd
	default:
		return filepath.Join(env.WorkDir, e.props.Cwd)
	}
}

// argv turns a command line into argv for the provider.
func (e *Exec) argv(line string) ([]string, error) {
	if e.provider == ProviderShell {
		return []string{"/bin/sh", "-c", line}, nil
	}
	return SplitCommand(line)
}

// run runs one command line with the resource's cwd, environment and path.
func (e *Exec) run(ctx context.Context, runner resources.CommandRunner, dir, line string) (resources.CommandResult, error) {
	argv, err := e.argv(line)
	if err != nil {
		return resources.CommandResult{}, fmt.Errorf("%s: %w", line, err)
	}
	if len(argv) == 0 {
		return resources.CommandResult{}, fmt.Errorf("%q: empty command", line)
	}
	return runner.Run(ctx, resources.Command{
		Argv: argv,
		Dir:  dir,
		Env:  slices.Clone(e.props.Environment),
		Path: e.props.Path,
	})
}

package pkg

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/manifold-run/manifold/resources"
)

// maxErrorOutput bounds how much of a failed command's output its error
// quotes, in bytes (the tail is kept: package managers print the reason
// last).
const maxErrorOutput = 512

// runner returns env's command runner, OSRunner when it has none.
func runner(env *resources.Env) resources.CommandRunner {
	if env != nil && env.Runner != nil {
		return env.Runner
	}
	return resources.OSRunner{}
}

// run runs argv and returns its result. A command that cannot start is an
// error; a non-zero exit is left to the caller.
func run(ctx context.Context, r resources.CommandRunner, env []string, argv ...string) (resources.CommandResult, error) {
	res, err := r.Run(ctx, resources.Command{Argv: argv, Env: env})
	if err != nil {
		return res, fmt.Errorf("%s: %w", argv[0], err)
	}
	return res, nil
}

// mustSucceed runs argv and turns a non-zero exit into an error wrapping
// ErrCommandFailed that quotes the tail of its output.
func mustSucceed(ctx context.Context, r resources.CommandRunner, env []string, argv ...string) error {
	res, err := run(ctx, r, env, argv...)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%w: %s exited %d: %s", ErrCommandFailed, strings.Join(argv, " "), res.ExitCode, reason(res))
	}
	return nil
}

// reason is the tail of a failed command's stderr, or of its stdout when
// stderr is empty, on one line.
func reason(res resources.CommandResult) string {
	out := bytes.TrimSpace(res.Stderr)
	if len(out) == 0 {
		out = bytes.TrimSpace(res.Stdout)
	}
	if len(out) > maxErrorOutput {
		out = append([]byte("…"), out[len(out)-maxErrorOutput:]...)
	}
	if len(out) == 0 {
		return "no output"
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(string(out), "\n", " | ")), " ")
}

package group

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/manifold-run/manifold/resources"
)

// maxErrorOutput bounds how much of a failed command's output its error
// quotes, in bytes.
const maxErrorOutput = 512

// Run runs argv through env's runner (OSRunner when it has none) and
// turns a non-zero exit into an error wrapping ErrCommandFailed that
// quotes the tool's message. The user type runs useradd, usermod and
// userdel with it too.
func Run(ctx context.Context, env *resources.Env, argv ...string) error {
	var r resources.CommandRunner = resources.OSRunner{}
	if env != nil && env.Runner != nil {
		r = env.Runner
	}
	res, err := r.Run(ctx, resources.Command{Argv: argv})
	if err != nil {
		return fmt.Errorf("%s: %w", argv[0], err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%w: %s exited %d: %s", ErrCommandFailed, strings.Join(argv, " "), res.ExitCode, reason(res))
	}
	return nil
}

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

package worker

import (
	"context"
	"path/filepath"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/resources"
)

// maxCommandAttr bounds the command line recorded on a span.
const maxCommandAttr = 512

// tracingRunner records every command a resource runs (guards such as
// onlyif and unless included) as a span under the current step.
type tracingRunner struct {
	inner resources.CommandRunner
}

// LookPath finds programs as the inner runner does when it is a
// resources.ProgramFinder (a replay runner knows the host it recorded),
// else in PATH, so wrapping a runner does not change which providers can
// manage the host.
func (r tracingRunner) LookPath(name string) (string, error) {
	return resources.LookPath(&resources.Env{Runner: r.inner}, name)
}

func (r tracingRunner) Run(ctx context.Context, cmd resources.Command) (resources.CommandResult, error) {
	name := "command"
	if len(cmd.Argv) > 0 {
		name += " " + filepath.Base(cmd.Argv[0])
	}
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer("github.com/manifold-run/manifold/worker")
	ctx, span := tracer.Start(ctx, name, trace.WithAttributes(
		attribute.String("manifold.command", short(strings.Join(cmd.Argv, " "), maxCommandAttr)),
		attribute.String("manifold.command.dir", cmd.Dir)))
	defer span.End()
	res, err := r.inner.Run(ctx, cmd)
	span.SetAttributes(attribute.Int("manifold.command.exit_code", res.ExitCode))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return res, err
}

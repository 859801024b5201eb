package resources

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
)

// Status is how one execution of a resource ended.
type Status string

const (
	// StatusChanged means the resource changed, or in noop would change.
	StatusChanged Status = "changed"
	// StatusStable means the resource was already in its desired state.
	StatusStable Status = "stable"
	// StatusFailed means check, apply or the re-check failed; Outcome.Err
	// says why.
	StatusFailed Status = "failed"
)

// Outcome is what Execute reports for one resource.
type Outcome struct {
	// Status is changed, stable or failed.
	Status Status
	// Changed is true when the resource changed or, in noop, would change.
	// Resources subscribing to this one are refreshed when it is true.
	Changed bool
	// Noop is true when nothing was applied because Env.Noop was set; a
	// changed Status then means "would change".
	Noop bool
	// Refreshed is true when a refresh made a Refresher act (or, in noop,
	// would have made it act).
	Refreshed bool
	// Message is a short human description: what changed ("created"), what
	// would change in noop ("would " and the check's message: "would
	// create") or the error.
	Message string
	// Diff optionally shows what differs (or, for ErrNotConverged, what
	// still differs after apply).
	Diff string
	// Err is set when Status is failed. It wraps ErrNotConverged when the
	// re-check still found drift, ErrHealthCheck when a health check failed,
	// and the context's cause when ctx ended.
	Err error
	// HealthChecks are the results of Env.HealthChecks, in order; nil when
	// none ran (no checks, or the resource failed before them).
	HealthChecks []HealthCheckResult
}

// Execute runs one resource through the engine (see execute), then its
// health checks (Env.HealthChecks), unless the resource failed.
//
// Health checks run after apply, or after the check when the resource was
// stable, one after the other; each result is in Outcome.HealthChecks and
// every status but OK is named in the message ("...; health checks: web
// WARNING"). CRITICAL or UNKNOWN fails the outcome with ErrHealthCheck
// (Changed stays true when the resource changed before). WARNING passes and
// is reported. In noop, the checks of a resource that would change are run
// and reported with Ignored set, and never fail it; the checks of a stable
// resource count as usual.
//
// With Env.HealthCheckOnly, Execute runs only the health checks: res is
// neither checked nor applied, the outcome is stable when they pass (or
// there are none) and failed otherwise.
func Execute(ctx context.Context, res Resource, env *Env) Outcome {
	if env == nil {
		env = &Env{}
	}
	if env.HealthCheckOnly {
		out := Outcome{Status: StatusStable, Noop: env.Noop, Message: "health-check-only: no health checks"}
		if len(env.HealthChecks) == 0 {
			return out
		}
		results, passed := runHealthChecks(ctx, env)
		out.HealthChecks = results
		out.Message = fmt.Sprintf("health-check-only: %d checks passed", len(results))
		if s := healthSummary(results); s != "" {
			out.Message += "; " + s
		}
		if !passed {
			out.Status, out.Err = StatusFailed, healthError(results)
			out.Message = firstLine(out.Err.Error())
		}
		return out
	}
	out := withHealthChecks(ctx, env, execute(ctx, res, env))
	out.Diff = BoundDiff(out.Diff)
	return out
}

// MaxDiffBytes bounds Outcome.Diff, whatever the type: a diff travels in
// the outcome message, the run's events and its report.
const MaxDiffBytes = 64 << 10

// BoundDiff cuts d to at most MaxDiffBytes, at a line boundary, ending it
// with "[manifold: diff truncated: N more bytes]" (the file type's marker;
// a diff it already cut is left as it is).
func BoundDiff(d string) string {
	if len(d) <= MaxDiffBytes {
		return d
	}
	const marker = "[manifold: diff truncated: %d more bytes]\n"
	keep := d[:MaxDiffBytes-len(marker)-20]
	if i := strings.LastIndexByte(keep, '\n'); i >= 0 {
		keep = keep[:i+1]
	}
	return keep + fmt.Sprintf(marker, len(d)-len(keep))
}

// withHealthChecks runs env's health checks after out, unless out failed,
// and folds their results into it (see Execute).
func withHealthChecks(ctx context.Context, env *Env, out Outcome) Outcome {
	if out.Status == StatusFailed || len(env.HealthChecks) == 0 {
		return out
	}
	results, passed := runHealthChecks(ctx, env)
	if out.Noop && out.Changed {
		for i := range results {
			results[i].Ignored = !results[i].Status.Passed()
		}
		passed = true
	}
	out.HealthChecks = results
	if s := healthSummary(results); s != "" {
		out.Message = cmp.Or(out.Message, string(out.Status)) + "; " + s
	}
	if !passed {
		out.Status, out.Err = StatusFailed, healthError(results)
		out.Message = firstLine(out.Err.Error())
	}
	return out
}

// execute runs one resource through the engine: check (CheckApply with
// apply=false); stable when nothing differs, unless Env.Refresh is set and
// the resource is a Refresher with Refreshable() true; in noop, stop and
// report what would change ("would " and the check's message, so types
// word check messages as verb phrases: "create", "update content");
// otherwise apply (CheckApply with apply=true) and
// re-check (unless the type is a Rechecker whose Recheck() is false), failing
// with ErrNotConverged when the re-check still reports a change.
//
// The re-check runs with Env.Refresh false: apply consumed the refresh.
// Execute returns early, failed with the context's cause, once ctx is done;
// a panic in the resource becomes a failed Outcome. env is not modified; a
// nil env means the zero Env.
func execute(ctx context.Context, res Resource, env *Env) (out Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = failed(ctx, "execute", fmt.Errorf("panic: %v", r))
		}
	}()

	check, refresh, done := checkStage(ctx, res, env)
	if done != nil {
		return *done
	}
	return applyStage(ctx, res, env, check, refresh, false)
}

// applyStage applies res (CheckApply with apply=true) after a check that
// found a change, then verifies it. An apply that finds nothing to do is
// stable (someone converged the resource in between, or a refreshable type
// declined the refresh), unless afterBatch: then a failed batch operation
// (see Batch) may have converged it, and it counts as changed so that its
// subscribers are refreshed.
func applyStage(ctx context.Context, res Resource, env *Env, check Result, refresh, afterBatch bool) Outcome {
	if ctx.Err() != nil {
		return failed(ctx, "apply", context.Cause(ctx))
	}
	applied, err := step(ctx, "apply", res, env, true)
	if err != nil {
		o := failed(ctx, "apply", err)
		o.Diff = check.Diff
		return o
	}
	if !applied.Changed {
		if !afterBatch {
			return Outcome{Status: StatusStable, Message: applied.Message}
		}
		applied.Changed = true
	}
	return verify(ctx, res, env, check, applied, refresh)
}

// checkStage is the engine's first stage: the check, and the decision it
// leads to. done is the final Outcome when there is nothing to apply
// (stable), the check failed, or env.Noop stops the execution here;
// otherwise check is what the check found and refresh says whether a
// refresh makes the resource act.
func checkStage(ctx context.Context, res Resource, env *Env) (check Result, refresh bool, done *Outcome) {
	end := func(o Outcome) (Result, bool, *Outcome) { return Result{}, false, &o }
	if ctx.Err() != nil {
		return end(failed(ctx, "check", context.Cause(ctx)))
	}
	check, err := step(ctx, "check", res, env, false)
	if err != nil {
		return end(failed(ctx, "check", err))
	}
	refresh = env.Refresh && refreshable(res)
	if !check.Changed && !refresh {
		return end(Outcome{Status: StatusStable, Message: check.Message})
	}
	if env.Noop {
		return end(Outcome{
			Status:    StatusChanged,
			Changed:   true,
			Noop:      true,
			Refreshed: refresh,
			Message:   wouldMessage(check, refresh),
			Diff:      check.Diff,
		})
	}
	return check, refresh, nil
}

// verify is the engine's last stage, after an apply that changed the
// resource: the re-check (unless the type is a Rechecker whose Recheck()
// is false), failing with ErrNotConverged when it still reports a change.
func verify(ctx context.Context, res Resource, env *Env, check, applied Result, refresh bool) Outcome {
	if rc, ok := res.(Rechecker); !ok || rc.Recheck() {
		if ctx.Err() != nil {
			return failed(ctx, "re-check", context.Cause(ctx))
		}
		recheckEnv := *env
		recheckEnv.Refresh = false
		again, err := step(ctx, "re-check", res, &recheckEnv, false)
		if err != nil {
			return failed(ctx, "re-check", err)
		}
		if again.Changed {
			detail := cmp.Or(again.Message, "still differs")
			if again.Diff != "" {
				detail += "\n" + again.Diff
			}
			o := failed(ctx, "re-check", fmt.Errorf("%w: %s", ErrNotConverged, detail))
			o.Diff = again.Diff
			return o
		}
	}

	return Outcome{
		Status:    StatusChanged,
		Changed:   true,
		Refreshed: refresh,
		Message:   cmp.Or(applied.Message, check.Message, "changed"),
		Diff:      cmp.Or(applied.Diff, check.Diff),
	}
}

// step runs one CheckApply in a span named after the stage (check, apply,
// re-check), a child of the span in ctx, from that span's provider: the
// engine wraps resources in telemetry, types know nothing of it.
func step(ctx context.Context, name string, res Resource, env *Env, apply bool) (Result, error) {
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer("github.com/manifold-run/manifold/resources")
	ctx, span := tracer.Start(ctx, name)
	defer span.End()
	r, err := res.CheckApply(ctx, env, apply)
	span.SetAttributes(attribute.Bool("manifold.changed", r.Changed), attribute.Bool("manifold.apply", apply))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return r, err
}

// refreshable reports whether res acts on refreshes.
func refreshable(res Resource) bool {
	r, ok := res.(Refresher)
	return ok && r.Refreshable()
}

// wouldMessage words a noop outcome: "would " and the check's message,
// which therefore reads best as a verb phrase ("create", "update content").
func wouldMessage(check Result, refresh bool) string {
	switch {
	case check.Changed && refresh:
		return "would " + cmp.Or(check.Message, "change") + " and refresh"
	case check.Changed:
		return "would " + cmp.Or(check.Message, "change")
	default:
		return "would refresh"
	}
}

// failed builds a failed Outcome for an error in stage. When ctx is done the
// context's cause is wrapped too, so errors.Is(out.Err, context.Canceled)
// (or the caller's cause) holds.
func failed(ctx context.Context, stage string, err error) Outcome {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		err = fmt.Errorf("%w: %w", cause, err)
	}
	err = fmt.Errorf("%s: %w", stage, err)
	return Outcome{Status: StatusFailed, Message: firstLine(err.Error()), Err: err}
}

// firstLine keeps messages one line long; diffs go in Outcome.Diff.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

package resources

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/resources/template"
)

const (
	// DefaultHealthCheckTimeout bounds one try of a health check whose
	// timeout is not set.
	DefaultHealthCheckTimeout = 30 * time.Second
	// DefaultHealthCheckTrySleep is the pause between tries when try_sleep
	// is not set (CCM's).
	DefaultHealthCheckTrySleep = time.Second
	// MaxHealthCheckTries bounds tries.
	MaxHealthCheckTries = 100
	// MaxHealthCheckOutput bounds the output kept per check result (4 KiB,
	// its start; a longer output ends with "[manifold: N bytes of output
	// truncated]").
	MaxHealthCheckOutput = 4 << 10
)

// HealthStatus is a nagios status: what a health check's exit code means.
type HealthStatus string

const (
	// HealthOK is exit code 0.
	HealthOK HealthStatus = "OK"
	// HealthWarning is exit code 1. It passes: the resource does not fail,
	// the warning is reported in Outcome.HealthChecks and its message.
	HealthWarning HealthStatus = "WARNING"
	// HealthCritical is exit code 2, and a try that timed out.
	HealthCritical HealthStatus = "CRITICAL"
	// HealthUnknown is exit code 3 or more, or a command that could not run.
	HealthUnknown HealthStatus = "UNKNOWN"
)

// Passed reports whether s lets the resource succeed (OK or WARNING).
func (s HealthStatus) Passed() bool { return s == HealthOK || s == HealthWarning }

// statusOf maps a nagios exit code to a status.
func statusOf(code int) HealthStatus {
	switch code {
	case 0:
		return HealthOK
	case 1:
		return HealthWarning
	case 2:
		return HealthCritical
	default:
		return HealthUnknown
	}
}

// HealthCheckFormat is how a health check is written and judged.
type HealthCheckFormat string

const (
	// FormatNagios is a command whose exit code is a nagios status.
	FormatNagios HealthCheckFormat = "nagios"
	// FormatGoss is a set of goss rules (goss_rules): OK when every rule
	// passes, CRITICAL when one fails.
	FormatGoss HealthCheckFormat = "goss"
)

// HealthCheck is one entry of a resource's health_checks, as in CCM: a
// nagios command whose exit code is a nagios status, or inline goss rules.
type HealthCheck struct {
	// Name identifies the check; empty means the command's first word, or
	// "goss" for goss rules.
	Name string `json:"name,omitempty"`
	// Command is run with /bin/sh -c, in Env.WorkDir, through Env.Runner.
	// Exclusive with GossRules.
	Command string `json:"command,omitempty"`
	// GossRules are goss rules (a goss file's content: file, service, port,
	// http, command, ...). Exclusive with Command.
	GossRules map[string]any `json:"goss_rules,omitempty"`
	// Format is nagios (with Command) or goss (with GossRules); empty means
	// the one that matches.
	Format HealthCheckFormat `json:"format,omitempty"`
	// Tries is how many times the command runs until it passes; default 1,
	// at most MaxHealthCheckTries.
	Tries int `json:"tries,omitempty"`
	// TrySleep is the pause between tries, a Go duration; default
	// DefaultHealthCheckTrySleep.
	TrySleep string `json:"try_sleep,omitempty"`
	// Timeout bounds each try, a Go duration; default
	// DefaultHealthCheckTimeout.
	Timeout string `json:"timeout,omitempty"`

	trySleep, timeout time.Duration
}

// HealthCheckResult is how one health check ended.
type HealthCheckResult struct {
	// Name is the check's name.
	Name string `json:"name"`
	// Status is the status of the last try.
	Status HealthStatus `json:"status"`
	// Output is the last try's stdout and stderr, trimmed and bounded by
	// MaxHealthCheckOutput.
	Output string `json:"output,omitempty"`
	// Tries is how many times the command ran.
	Tries int `json:"tries"`
	// Ignored is true in noop for a resource that would change: the result
	// is reported but does not fail the resource (the check looked at the
	// system before the change).
	Ignored bool `json:"ignored,omitempty"`
}

// ParseHealthChecks decodes and checks a resource's health_checks (the
// maps schemas.Resource.HealthChecks holds), rendering templates in their
// string values against scope. Errors name the check by its position:
// `health_checks[1]: timeout "x": ...`.
func ParseHealthChecks(raw []map[string]any, scope template.Scope) ([]HealthCheck, error) {
	out := make([]HealthCheck, 0, len(raw))
	for i, m := range raw {
		v, err := template.RenderValue(m, scope)
		if err != nil {
			return nil, fmt.Errorf("health_checks[%d]: %w", i, err)
		}
		var hc HealthCheck
		if v != nil {
			if err := DecodeProperties(v.(map[string]any), &hc); err != nil {
				return nil, fmt.Errorf("health_checks[%d]: %w", i, err)
			}
		}
		if hc.GossRules != nil {
			// goss rules' keys name what they check (a path, a URL): render
			// them too, as CCM renders the whole rules document.
			if hc.GossRules, err = renderKeys(hc.GossRules, scope, "goss_rules"); err != nil {
				return nil, fmt.Errorf("health_checks[%d]: %w", i, err)
			}
		}
		if err := hc.validate(); err != nil {
			return nil, fmt.Errorf("health_checks[%d]: %w", i, err)
		}
		out = append(out, hc)
	}
	return out, nil
}

// validate checks a health check and fills its defaults.
func (hc *HealthCheck) validate() error {
	hasCommand, hasGoss := strings.TrimSpace(hc.Command) != "", hc.GossRules != nil
	switch {
	case hasCommand && hasGoss:
		return errors.New("command and goss_rules are mutually exclusive; set only one")
	case !hasCommand && !hasGoss:
		return errors.New("command: empty; set command (nagios) or goss_rules (goss)")
	case hasGoss:
		if err := checkGossRules(hc.GossRules); err != nil {
			return err
		}
	}
	switch hc.Format {
	case "":
		hc.Format = FormatNagios
		if hasGoss {
			hc.Format = FormatGoss
		}
	case FormatNagios:
		if !hasCommand {
			return errors.New(`format "nagios": wants command, not goss_rules`)
		}
	case FormatGoss:
		if !hasGoss {
			return errors.New(`format "goss": wants goss_rules, not command`)
		}
	default:
		return fmt.Errorf("format %q: want nagios or goss", hc.Format)
	}
	if hc.Tries < 0 || hc.Tries > MaxHealthCheckTries {
		return fmt.Errorf("tries %d: want 1 to %d", hc.Tries, MaxHealthCheckTries)
	}
	hc.Tries = max(hc.Tries, 1)
	if hc.Name == "" {
		hc.Name = string(FormatGoss)
		if hasCommand {
			hc.Name, _, _ = strings.Cut(strings.TrimSpace(hc.Command), " ")
		}
	}
	var err error
	if hc.trySleep, err = duration("try_sleep", hc.TrySleep, DefaultHealthCheckTrySleep); err != nil {
		return err
	}
	if hc.timeout, err = duration("timeout", hc.Timeout, DefaultHealthCheckTimeout); err != nil {
		return err
	}
	return nil
}

func duration(prop, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s %q: want a Go duration such as \"5s\"", prop, s)
	}
	return d, nil
}

// runHealthChecks runs each check in turn, in a span named "health_check"
// per check, and returns the results and whether all passed.
func runHealthChecks(ctx context.Context, env *Env) ([]HealthCheckResult, bool) {
	runner := env.Runner
	if runner == nil {
		runner = OSRunner{}
	}
	results := make([]HealthCheckResult, 0, len(env.HealthChecks))
	passed := true
	for _, hc := range env.HealthChecks {
		if hc.Tries == 0 {
			// Not built by ParseHealthChecks: fill the defaults.
			if err := hc.validate(); err != nil {
				results = append(results, HealthCheckResult{Name: hc.Name, Status: HealthUnknown, Output: err.Error()})
				passed = false
				continue
			}
		}
		r := runHealthCheck(ctx, runner, env.WorkDir, hc)
		results = append(results, r)
		passed = passed && r.Status.Passed()
	}
	return results, passed
}

func runHealthCheck(ctx context.Context, runner CommandRunner, dir string, hc HealthCheck) HealthCheckResult {
	tracer := trace.SpanFromContext(ctx).TracerProvider().Tracer("github.com/manifold-run/manifold/resources")
	ctx, span := tracer.Start(ctx, "health_check", trace.WithAttributes(attribute.String("manifold.health_check", hc.Name)))
	defer span.End()

	r := HealthCheckResult{Name: hc.Name}
	for r.Tries < hc.Tries {
		if r.Tries > 0 {
			t := time.NewTimer(hc.trySleep)
			select {
			case <-ctx.Done():
				t.Stop()
				r.Status, r.Output = HealthUnknown, "cancelled: "+context.Cause(ctx).Error()
				return finishSpan(span, r)
			case <-t.C:
			}
		}
		r.Tries++
		tctx, cancel := context.WithTimeoutCause(ctx, hc.timeout, fmt.Errorf("timed out after %s", hc.timeout))
		var out string
		if hc.Format == FormatGoss {
			r.Status, out = runGoss(tctx, hc.GossRules)
			if cause := context.Cause(tctx); cause != nil && ctx.Err() == nil {
				r.Status, out = HealthCritical, strings.TrimSpace(cause.Error()+"\n"+out)
			}
		} else {
			res, err := runner.Run(tctx, Command{Argv: []string{"/bin/sh", "-c", hc.Command}, Dir: dir})
			cause := context.Cause(tctx)
			out = strings.TrimSpace(string(res.Stdout) + string(res.Stderr))
			switch {
			case err != nil && ctx.Err() == nil && cause != nil:
				r.Status, out = HealthCritical, strings.TrimSpace(cause.Error()+"\n"+out)
			case err != nil:
				r.Status, out = HealthUnknown, strings.TrimSpace(err.Error()+"\n"+out)
			default:
				r.Status = statusOf(res.ExitCode)
			}
		}
		cancel()
		r.Output = boundHealthOutput(out)
		if r.Status == HealthOK || ctx.Err() != nil {
			break
		}
	}
	return finishSpan(span, r)
}

func finishSpan(span trace.Span, r HealthCheckResult) HealthCheckResult {
	span.SetAttributes(attribute.String("manifold.health_status", string(r.Status)), attribute.Int("manifold.tries", r.Tries))
	if !r.Status.Passed() {
		span.SetStatus(codes.Error, string(r.Status)+": "+firstLine(r.Output))
	}
	return r
}

func boundHealthOutput(s string) string {
	if len(s) <= MaxHealthCheckOutput {
		return s
	}
	return s[:MaxHealthCheckOutput] + fmt.Sprintf("\n[manifold: %d bytes of output truncated]", len(s)-MaxHealthCheckOutput)
}

// healthSummary words the results for an outcome's message: "" when all
// are OK, else "health checks: web WARNING, db CRITICAL".
func healthSummary(results []HealthCheckResult) string {
	var bad []string
	for _, r := range results {
		if r.Status != HealthOK {
			s := r.Name + " " + string(r.Status)
			if r.Ignored {
				s += " (ignored in noop)"
			}
			bad = append(bad, s)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return "health checks: " + strings.Join(bad, ", ")
}

// healthError is the error of a resource whose health checks failed.
func healthError(results []HealthCheckResult) error {
	var parts []string
	for _, r := range results {
		if !r.Status.Passed() && !r.Ignored {
			parts = append(parts, fmt.Sprintf("%s %s after %d tries: %s", r.Name, r.Status, r.Tries, cmp.Or(firstLine(r.Output), "no output")))
		}
	}
	return fmt.Errorf("%w: %s", ErrHealthCheck, strings.Join(parts, "; "))
}

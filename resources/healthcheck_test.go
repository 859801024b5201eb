package resources

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/manifold-run/manifold/resources/template"
)

func checks(t *testing.T, raw ...map[string]any) []HealthCheck {
	t.Helper()
	hcs, err := ParseHealthChecks(raw, template.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	return hcs
}

func TestHealthCheckStatuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		command string
		status  Status
		health  HealthStatus
		message string
	}{
		{"echo fine", StatusChanged, HealthOK, "updated"},
		{"echo degraded; exit 1", StatusChanged, HealthWarning, "updated; health checks: c WARNING"},
		{"echo down; exit 2", StatusFailed, HealthCritical, "health check failed: c CRITICAL after 1 tries: down"},
		{"exit 3", StatusFailed, HealthUnknown, "health check failed: c UNKNOWN after 1 tries: no output"},
		{"/nonexistent/check", StatusFailed, HealthUnknown, "health check failed: c UNKNOWN after 1 tries: "},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			t.Parallel()
			f := &fake{}
			out := Execute(t.Context(), f, &Env{HealthChecks: checks(t, map[string]any{"name": "c", "command": tt.command})})
			if out.Status != tt.status || !out.Changed || len(out.HealthChecks) != 1 || out.HealthChecks[0].Status != tt.health {
				t.Fatalf("outcome %+v", out)
			}
			if out.Message != tt.message && !(tt.command == "/nonexistent/check" && strings.HasPrefix(out.Message, tt.message) && strings.Contains(out.Message, "not found")) {
				t.Fatalf("message %q, want %q", out.Message, tt.message)
			}
			if (tt.status == StatusFailed) != errors.Is(out.Err, ErrHealthCheck) {
				t.Fatalf("err %v", out.Err)
			}
			if f.applies != 1 {
				t.Fatalf("%d applies", f.applies)
			}
		})
	}
}

func TestHealthCheckTries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Passes on the third run: each run appends a line.
	cmd := `echo x >> n; test "$(wc -l < n)" -ge 3 || { echo "not yet"; exit 2; }; echo up`
	hc := checks(t, map[string]any{"command": cmd, "tries": 3, "try_sleep": "1ms", "name": "up"})
	out := Execute(t.Context(), &fake{converged: true}, &Env{WorkDir: dir, HealthChecks: hc})
	if out.Status != StatusStable || out.HealthChecks[0] != (HealthCheckResult{Name: "up", Status: HealthOK, Output: "up", Tries: 3}) {
		t.Fatalf("outcome %+v", out)
	}
	// Two tries are not enough on a fresh directory.
	dir = t.TempDir()
	hc = checks(t, map[string]any{"command": cmd, "tries": 2, "try_sleep": "1ms", "name": "up"})
	out = Execute(t.Context(), &fake{converged: true}, &Env{WorkDir: dir, HealthChecks: hc})
	if out.Status != StatusFailed || out.HealthChecks[0].Tries != 2 || out.Message != "health check failed: up CRITICAL after 2 tries: not yet" {
		t.Fatalf("outcome %+v", out)
	}
}

func TestHealthCheckTimeout(t *testing.T) {
	t.Parallel()
	start := time.Now()
	hc := checks(t, map[string]any{"command": "sleep 30", "timeout": "100ms", "tries": 2, "try_sleep": "1ms"})
	out := Execute(t.Context(), &fake{converged: true}, &Env{HealthChecks: hc})
	if out.Status != StatusFailed || out.HealthChecks[0].Status != HealthCritical || out.HealthChecks[0].Tries != 2 ||
		!strings.HasPrefix(out.HealthChecks[0].Output, "timed out after 100ms") {
		t.Fatalf("outcome %+v", out)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s", d)
	}
}

func TestHealthCheckNoop(t *testing.T) {
	t.Parallel()
	hc := checks(t, map[string]any{"name": "c", "command": "exit 2"})
	// Would change: reported, not counted.
	f := &fake{}
	out := Execute(t.Context(), f, &Env{Noop: true, HealthChecks: hc})
	if out.Status != StatusChanged || !out.Noop || !out.HealthChecks[0].Ignored || out.Message != "would update content; health checks: c CRITICAL (ignored in noop)" || f.applies != 0 {
		t.Fatalf("outcome %+v", out)
	}
	// Stable: counted.
	out = Execute(t.Context(), &fake{converged: true}, &Env{Noop: true, HealthChecks: hc})
	if out.Status != StatusFailed || out.HealthChecks[0].Ignored || !errors.Is(out.Err, ErrHealthCheck) {
		t.Fatalf("outcome %+v", out)
	}
}

func TestHealthCheckOnly(t *testing.T) {
	t.Parallel()
	f := &fake{panics: true} // any CheckApply call would fail the test
	out := Execute(t.Context(), f, &Env{HealthCheckOnly: true, HealthChecks: checks(t,
		map[string]any{"command": "true", "name": "a"}, map[string]any{"command": "exit 1", "name": "b"})})
	if out.Status != StatusStable || out.Message != "health-check-only: 2 checks passed; health checks: b WARNING" || len(out.HealthChecks) != 2 {
		t.Fatalf("outcome %+v", out)
	}
	out = Execute(t.Context(), f, &Env{HealthCheckOnly: true, HealthChecks: checks(t, map[string]any{"command": "exit 2", "name": "a"})})
	if out.Status != StatusFailed || !errors.Is(out.Err, ErrHealthCheck) {
		t.Fatalf("outcome %+v", out)
	}
	if out := Execute(t.Context(), f, &Env{HealthCheckOnly: true}); out.Status != StatusStable || out.Message != "health-check-only: no health checks" {
		t.Fatalf("outcome %+v", out)
	}
	if f.checks+f.applies != 0 {
		t.Fatal("the resource was checked")
	}
}

func TestHealthCheckNotRunAfterFailure(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	out := Execute(t.Context(), &fake{applyErr: errors.New("nope")}, &Env{HealthChecks: checks(t, map[string]any{"command": "touch " + marker})})
	if out.Status != StatusFailed || out.HealthChecks != nil {
		t.Fatalf("outcome %+v", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("health check ran after a failure")
	}
}

func TestHealthCheckOutputBound(t *testing.T) {
	t.Parallel()
	out := Execute(t.Context(), &fake{converged: true}, &Env{HealthChecks: checks(t, map[string]any{"command": "head -c 10000 /dev/zero | tr '\\0' a"})})
	o := out.HealthChecks[0].Output
	if !strings.HasPrefix(o, strings.Repeat("a", MaxHealthCheckOutput)+"\n[manifold: 5904 bytes of output truncated]") {
		t.Fatalf("output of %d bytes: %q", len(o), o[len(o)-60:])
	}
	if at := strings.Repeat("a", MaxHealthCheckOutput); boundHealthOutput(at) != at {
		t.Fatal("output at the bound was cut")
	}
}

func TestHealthCheckSpans(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(t.Context(), "task")
	Execute(ctx, &fake{converged: true}, &Env{HealthChecks: checks(t,
		map[string]any{"command": "true", "name": "a"}, map[string]any{"command": "exit 2", "name": "b"})})
	span.End()
	var names []string
	for _, s := range exp.GetSpans() {
		if s.Name == "health_check" {
			for _, a := range s.Attributes {
				if a.Key == "manifold.health_check" {
					names = append(names, a.Value.AsString()+":"+s.Status.Code.String())
				}
			}
		}
	}
	if strings.Join(names, ",") != "a:Unset,b:Error" {
		t.Fatalf("health_check spans %v", names)
	}
}

func TestParseHealthChecks(t *testing.T) {
	t.Parallel()
	hcs, err := ParseHealthChecks([]map[string]any{{"command": "/usr/lib/nagios/check_http -H {{ lookup('data.host') }}"}},
		template.Scope{Data: map[string]any{"host": "web1"}})
	if err != nil {
		t.Fatal(err)
	}
	if hc := hcs[0]; hc.Command != "/usr/lib/nagios/check_http -H web1" || hc.Name != "/usr/lib/nagios/check_http" || hc.Tries != 1 ||
		hc.timeout != DefaultHealthCheckTimeout || hc.trySleep != DefaultHealthCheckTrySleep {
		t.Fatalf("parsed %+v", hc)
	}
	for _, tc := range []struct {
		raw  map[string]any
		want string
	}{
		{map[string]any{"command": "x", "timeout": "soon"}, `health_checks[0]: timeout "soon": want a Go duration`},
		{map[string]any{"command": "x", "try_sleep": "-1s"}, `health_checks[0]: try_sleep "-1s"`},
		{map[string]any{"command": "x", "tries": 101}, "health_checks[0]: tries 101: want 1 to 100"},
		{map[string]any{"goss_rules": map[string]any{}}, `health_checks[0]: goss_rules: no rules`},
		{map[string]any{"command": "x", "format": "goss"}, `format "goss": wants goss_rules, not command`},
		{map[string]any{"command": "x", "format": "json"}, `format "json": want nagios or goss`},
		{map[string]any{"name": "x"}, "health_checks[0]: command: empty; set command (nagios) or goss_rules (goss)"},
		{map[string]any{"command": "x", "goss_rules": map[string]any{"file": map[string]any{"/": map[string]any{"exists": true}}}},
			"health_checks[0]: command and goss_rules are mutually exclusive"},
		{map[string]any{"goss_rules": map[string]any{"file": map[string]any{"/": map[string]any{"exists": true}}}, "format": "nagios"},
			`format "nagios": wants command, not goss_rules`},
		{map[string]any{"goss_rules": map[string]any{"no_such_type": map[string]any{}}}, `health_checks[0]: goss_rules: unknown field "no_such_type"`},
		{map[string]any{"goss_rules": map[string]any{"file": map[string]any{"/": map[string]any{"colour": "red"}}}}, `health_checks[0]: goss_rules: `},
	} {
		if _, err := ParseHealthChecks([]map[string]any{tc.raw}, template.Scope{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.raw, err, tc.want)
		}
	}
}

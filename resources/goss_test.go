package resources

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manifold-run/manifold/resources/template"
)

// TestGossHealthCheck runs goss rules against this machine: a real file in
// a temporary directory, a real command and a real HTTP server on
// loopback. Every rule passing is OK; one failing is CRITICAL and fails the
// resource with the failed rule in the error.
func TestGossHealthCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "app.conf")
	if err := os.WriteFile(conf, []byte("listen 80\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "Acme Inc")
	}))
	t.Cleanup(srv.Close)
	rules := func(mode string) map[string]any {
		return map[string]any{
			"file":    map[string]any{conf: map[string]any{"exists": true, "mode": mode, "contents": []any{"listen 80"}}},
			"command": map[string]any{"echo ready": map[string]any{"exit-status": 0, "stdout": []any{"ready"}}},
			"http":    map[string]any{srv.URL: map[string]any{"status": 200, "body": []any{"Acme Inc"}}},
		}
	}

	out := Execute(t.Context(), &fake{}, &Env{HealthChecks: checks(t, map[string]any{"goss_rules": rules("0640")})})
	if out.Status != StatusChanged || len(out.HealthChecks) != 1 {
		t.Fatalf("outcome %+v", out)
	}
	if r := out.HealthChecks[0]; r.Name != "goss" || r.Status != HealthOK || r.Tries != 1 || r.Output != "goss: 7 rules, 0 failed, 0 skipped" {
		t.Fatalf("result %+v", r)
	}

	out = Execute(t.Context(), &fake{}, &Env{HealthChecks: checks(t, map[string]any{"name": "app", "goss_rules": rules("0600")})})
	if out.Status != StatusFailed || len(out.HealthChecks) != 1 {
		t.Fatalf("outcome %+v", out)
	}
	r := out.HealthChecks[0]
	if r.Status != HealthCritical || !strings.HasSuffix(r.Output, "goss: 7 rules, 1 failed, 0 skipped") ||
		!strings.Contains(r.Output, conf) || !strings.Contains(r.Output, "mode") {
		t.Fatalf("result %+v", r)
	}
	if msg := out.Err.Error(); !strings.Contains(msg, "app CRITICAL after 1 tries: File: "+conf+": mode:") {
		t.Fatalf("error %q", msg)
	}
}

// TestGossHealthCheckTries: goss rules are retried like a command until
// they pass (a command rule that passes on its third run).
func TestGossHealthCheckTries(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "tries")
	hcs := checks(t, map[string]any{"tries": 5, "try_sleep": "10ms", "goss_rules": map[string]any{
		"command": map[string]any{
			fmt.Sprintf("echo x >> %s; [ $(wc -l < %s) -ge 3 ]", marker, marker): map[string]any{"exit-status": 0},
		},
	}})
	out := Execute(t.Context(), &fake{}, &Env{HealthChecks: hcs})
	if out.Status != StatusChanged || len(out.HealthChecks) != 1 {
		t.Fatalf("outcome %+v", out)
	}
	if r := out.HealthChecks[0]; r.Status != HealthOK || r.Tries != 3 || r.Output != "goss: 1 rules, 0 failed, 0 skipped" {
		t.Fatalf("result %+v", r)
	}
}

// TestGossHealthCheckTimeout: a goss try past the check's timeout is
// CRITICAL and says so.
func TestGossHealthCheckTimeout(t *testing.T) {
	t.Parallel()
	hcs := checks(t, map[string]any{"timeout": "200ms", "goss_rules": map[string]any{
		"command": map[string]any{"sleep 2": map[string]any{"exit-status": 0}},
	}})
	start := time.Now()
	out := Execute(t.Context(), &fake{}, &Env{HealthChecks: hcs})
	if time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("took %s: the timeout did not bound the try", time.Since(start))
	}
	if out.Status != StatusFailed || out.HealthChecks[0].Status != HealthCritical ||
		!strings.Contains(out.HealthChecks[0].Output, "timed out after 200ms") {
		t.Fatalf("outcome %+v", out)
	}
}

// TestGossRulesTemplates: templates in goss rules' keys and values are
// rendered against the scope, as CCM renders the rules document.
func TestGossRulesTemplates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "motd")
	if err := os.WriteFile(p, []byte("welcome to web1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hcs, err := ParseHealthChecks([]map[string]any{{"goss_rules": map[string]any{
		"file": map[string]any{"{{ lookup('data.path') }}": map[string]any{"exists": true, "contents": []any{"welcome to {{ lookup('data.host') }}"}}},
	}}}, template.Scope{Data: map[string]any{"path": p, "host": "web1"}})
	if err != nil {
		t.Fatal(err)
	}
	file := hcs[0].GossRules["file"].(map[string]any)
	if _, ok := file[p]; !ok || len(file) != 1 {
		t.Fatalf("rendered rules %v", hcs[0].GossRules)
	}
	out := Execute(t.Context(), &fake{}, &Env{HealthChecks: hcs})
	if out.Status != StatusChanged || out.HealthChecks[0].Status != HealthOK {
		t.Fatalf("outcome %+v", out)
	}
}

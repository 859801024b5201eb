package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// healthReport is the part of the run report that health checks add: each
// resource's health_checks, as the README documents them.
type healthReport struct {
	Status          string `json:"status"`
	HealthCheckOnly bool   `json:"health_check_only"`
	Noop            bool   `json:"noop"`
	Resources       []struct {
		Ref          string        `json:"ref"`
		Status       string        `json:"status"`
		Message      string        `json:"message"`
		Error        string        `json:"error"`
		HealthChecks []healthCheck `json:"health_checks"`
	} `json:"resources"`
}

// healthCheck is one entry of a resource's health_checks in the report.
type healthCheck struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Output  string `json:"output"`
	Tries   int    `json:"tries"`
	Ignored bool   `json:"ignored"`
}

func decodeHealthReport(t *testing.T, r result) *healthReport {
	t.Helper()
	var rep healthReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("stdout is not a run report: %v\n%s", err, r)
	}
	return &rep
}

// checks returns ref's status and health check results, by check name.
func (h *healthReport) checks(t *testing.T, ref string) (string, map[string]healthCheck) {
	t.Helper()
	for _, res := range h.Resources {
		if res.Ref == ref {
			m := make(map[string]healthCheck, len(res.HealthChecks))
			for _, c := range res.HealthChecks {
				m[c.Name] = c
			}
			return res.Status, m
		}
	}
	t.Fatalf("report has no resource %s: %+v", ref, h.Resources)
	return "", nil
}

// wantCheck fails the test unless got holds a check name with status,
// tries and an output containing output.
func wantCheck(t *testing.T, ref string, got map[string]healthCheck, name, status string, tries int, output string, ignored bool) {
	t.Helper()
	c, ok := got[name]
	switch {
	case !ok:
		t.Errorf("%s: no health check %q in %+v", ref, name, got)
	case c.Status != status || c.Tries != tries || !strings.Contains(c.Output, output) || c.Ignored != ignored:
		t.Errorf("%s: check %q: want %s after %d tries, output containing %q, ignored %v; got %+v",
			ref, name, status, tries, output, ignored, c)
	}
}

// healthManifest is a manifest whose resources carry nagios-style checks
// of each status: OK on the third try (a counter file), WARNING (passes),
// CRITICAL, UNKNOWN, and a try that times out. A resource that requires
// the critical one shows that a failed check fails the resource for the
// graph too.
const healthManifest = `
resources:
  - file:
      - $D/out/site.conf:
          content: "listen 80\n"
          health_checks:
            - name: config
              command: grep -q 'listen 80' $D/out/site.conf && echo 'OK - listening on 80'
            - name: flaky
              command: 'n=$(cat $D/out/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > $D/out/count; [ $n -ge 3 ] && echo "OK - up after $n" && exit 0; echo "CRITICAL - try $n"; exit 2'
              tries: 5
              try_sleep: 10ms
            - name: disk
              command: "echo 'WARNING - disk 81% full'; exit 1"
  - exec:
      - critical:
          command: "true"
          health_checks:
            - {name: db, command: "echo 'CRITICAL - db down'; exit 2", tries: 2, try_sleep: 10ms}
      - unknown:
          command: "true"
          health_checks:
            - {name: probe, command: "echo 'UNKNOWN - no probe'; exit 3"}
      - slow:
          command: "true"
          health_checks:
            - {name: hang, command: "sleep 30", timeout: 200ms}
      - after-critical:
          command: "touch $D/out/after"
          require: [exec#critical]
`

// TestHealthChecksApply runs health checks through a real `manifold apply`:
// each check's status, tries and output are in the JSON report; WARNING
// passes, CRITICAL, UNKNOWN and a timed-out try fail the resource (exit 1)
// and skip what requires it; the text output names every status but OK.
func TestHealthChecksApply(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"manifest.yaml": healthManifest})
	manifest := filepath.Join(dir, "manifest.yaml")

	r := runWith(t, runOpts{}, "apply", "--output", "json", manifest)
	wantCode(t, r, 1)
	rep := decodeHealthReport(t, r)
	if rep.Status != "failed" {
		t.Errorf("run status: want failed, got %s", rep.Status)
	}
	file := "file#" + dir + "/out/site.conf"
	status, got := rep.checks(t, file)
	if status != "changed" {
		t.Errorf("%s: WARNING passes, want changed, got %s", file, status)
	}
	wantCheck(t, file, got, "config", "OK", 1, "OK - listening on 80", false)
	wantCheck(t, file, got, "flaky", "OK", 3, "OK - up after 3", false)
	wantCheck(t, file, got, "disk", "WARNING", 1, "WARNING - disk 81% full", false)
	if len(got) != 3 {
		t.Errorf("%s: want 3 checks, got %+v", file, got)
	}

	status, got = rep.checks(t, "exec#critical")
	if status != "failed" {
		t.Errorf("exec#critical: want failed, got %s", status)
	}
	wantCheck(t, "exec#critical", got, "db", "CRITICAL", 2, "CRITICAL - db down", false)
	status, got = rep.checks(t, "exec#unknown")
	if status != "failed" {
		t.Errorf("exec#unknown: want failed, got %s", status)
	}
	wantCheck(t, "exec#unknown", got, "probe", "UNKNOWN", 1, "UNKNOWN - no probe", false)
	status, got = rep.checks(t, "exec#slow")
	if status != "failed" {
		t.Errorf("exec#slow: want failed, got %s", status)
	}
	wantCheck(t, "exec#slow", got, "hang", "CRITICAL", 1, "timed out after 200ms", false)
	if status, _ := rep.checks(t, "exec#after-critical"); status != "skipped" {
		t.Errorf("exec#after-critical: requires a resource whose check failed, want skipped, got %s", status)
	}
	wantAbsent(t, filepath.Join(dir, "out", "after"))
	for _, res := range rep.Resources {
		if res.Ref == "exec#critical" && !strings.Contains(res.Error, "db CRITICAL after 2 tries: CRITICAL - db down") {
			t.Errorf("exec#critical: error should name the check, status, tries and output: %q", res.Error)
		}
	}

	// The text output: a line per resource naming what is not OK.
	if err := os.Remove(filepath.Join(dir, "out", "count")); err != nil {
		t.Fatal(err)
	}
	r = runWith(t, runOpts{}, "apply", manifest)
	wantCode(t, r, 1)
	for _, want := range []string{
		"stable       " + file + ": stable; health checks: disk WARNING",
		"failed       exec#critical: health check failed: db CRITICAL after 2 tries: CRITICAL - db down",
		"failed       exec#unknown: health check failed: probe UNKNOWN after 1 tries: UNKNOWN - no probe",
		"failed       exec#slow: health check failed: hang CRITICAL after 1 tries: timed out after 200ms",
		"skipped      exec#after-critical",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("text output lacks %q:\n%s", want, r)
		}
	}
}

// TestHealthChecksPassingExitZero: a run whose checks are OK or WARNING
// exits 0, and a resource's checks run when it was already stable.
func TestHealthChecksPassingExitZero(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"manifest.yaml": `
resources:
  - file:
      - $D/out/a.txt:
          content: "a\n"
          health_checks:
            - {name: present, command: "test -s $D/out/a.txt"}
            - {name: disk, command: "echo 'WARNING - 81%'; exit 1"}
`})
	manifest := filepath.Join(dir, "manifest.yaml")
	ref := "file#" + dir + "/out/a.txt"
	for i, want := range []string{"changed", "stable"} {
		r := runWith(t, runOpts{}, "apply", "--output", "json", manifest)
		wantCode(t, r, 0)
		status, got := decodeHealthReport(t, r).checks(t, ref)
		if status != want {
			t.Errorf("apply %d: %s: want %s, got %s", i+1, ref, want, status)
		}
		wantCheck(t, ref, got, "present", "OK", 1, "", false)
		wantCheck(t, ref, got, "disk", "WARNING", 1, "WARNING - 81%", false)
	}
}

// TestHealthChecksOnlyMode: --health-check-only and its alias
// --monitor-only change nothing (a drifted file stays drifted, an exec does
// not run), run every check, report health_check_only, and exit 1 when a
// check is CRITICAL and 0 when every check passes; a resource without
// checks is stable and not looked at.
func TestHealthChecksOnlyMode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml": `
resources:
  - file:
      - $D/out/site.conf:
          content: "listen 80\n"
          health_checks:
            - {name: config, command: "grep -qx 'listen 80' $D/out/site.conf || { echo 'CRITICAL - not listening on 80'; exit 2; }"}
  - exec:
      - never:
          command: "touch $D/out/ran"
  - file:
      - $D/out/unchecked.txt:
          content: "x\n"
`,
		"out/site.conf": "listen 8080\n",
	})
	manifest := filepath.Join(dir, "manifest.yaml")
	file := "file#" + dir + "/out/site.conf"
	for _, flag := range []string{"--health-check-only", "--monitor-only"} {
		r := runWith(t, runOpts{}, "apply", "--output", "json", flag, manifest)
		wantCode(t, r, 1)
		rep := decodeHealthReport(t, r)
		if !rep.HealthCheckOnly {
			t.Errorf("%s: report says health_check_only false", flag)
		}
		status, got := rep.checks(t, file)
		if status != "failed" {
			t.Errorf("%s: %s: want failed, got %s", flag, file, status)
		}
		wantCheck(t, file, got, "config", "CRITICAL", 1, "CRITICAL - not listening on 80", false)
		for _, ref := range []string{"exec#never", "file#" + dir + "/out/unchecked.txt"} {
			if status, got := rep.checks(t, ref); status != "stable" || len(got) != 0 {
				t.Errorf("%s: %s: no checks, want stable with none, got %s %+v", flag, ref, status, got)
			}
		}
		if got := readFile(t, filepath.Join(dir, "out", "site.conf")); got != "listen 8080\n" {
			t.Errorf("%s: the file was changed: %q", flag, got)
		}
		wantAbsent(t, filepath.Join(dir, "out", "ran"))
		wantAbsent(t, filepath.Join(dir, "out", "unchecked.txt"))
	}

	// Once the drift is repaired by a normal apply, the checks pass: exit 0.
	wantCode(t, runWith(t, runOpts{}, "apply", manifest), 0)
	r := runWith(t, runOpts{}, "apply", "--monitor-only", manifest)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "stable       "+file+": health-check-only: 1 checks passed") {
		t.Errorf("text output lacks the passed check:\n%s", r)
	}
}

// TestHealthChecksNoop: in noop, the checks of a resource that would change
// are run and reported as ignored (they looked at the system before the
// change), never failing the run; those of a stable resource count.
func TestHealthChecksNoop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml": `
resources:
  - file:
      - $D/out/new.conf:
          content: "new\n"
          health_checks:
            - {name: exists, command: "test -f $D/out/new.conf || { echo 'CRITICAL - missing'; exit 2; }"}
      - $D/out/old.conf:
          content: "old\n"
          health_checks:
            - {name: broken, command: "echo 'CRITICAL - broken'; exit 2"}
`,
		"out/old.conf": "old\n",
	})
	manifest := filepath.Join(dir, "manifest.yaml")
	r := runWith(t, runOpts{}, "apply", "--output", "json", "--noop", manifest)
	wantCode(t, r, 1)
	rep := decodeHealthReport(t, r)
	newRef, oldRef := "file#"+dir+"/out/new.conf", "file#"+dir+"/out/old.conf"
	status, got := rep.checks(t, newRef)
	if status != "changed" {
		t.Errorf("%s: want changed (would change), got %s", newRef, status)
	}
	wantCheck(t, newRef, got, "exists", "CRITICAL", 1, "CRITICAL - missing", true)
	status, got = rep.checks(t, oldRef)
	if status != "failed" {
		t.Errorf("%s: stable in noop, its check counts: want failed, got %s", oldRef, status)
	}
	wantCheck(t, oldRef, got, "broken", "CRITICAL", 1, "CRITICAL - broken", false)
	wantAbsent(t, filepath.Join(dir, "out", "new.conf"))
}

// TestHealthChecksGoss: CCM's goss_rules through `manifold apply`: rules
// passing leave the resource changed with an OK check; a failing rule is
// CRITICAL, named in the report and the text output, and exits 1;
// templates in rules are rendered; an unknown goss type fails the resource
// naming it.
func TestHealthChecksGoss(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"manifest.yaml": `
data:
  owner_port: 80
resources:
  - file:
      - $D/out/site.conf:
          content: "listen {{ Data.owner_port }}\n"
          mode: "0640"
          health_checks:
            - name: site
              goss_rules:
                file:
                  $D/out/site.conf:
                    exists: true
                    mode: "0640"
                    contents: ["listen {{ Data.owner_port }}"]
                command:
                  "echo ready":
                    exit-status: 0
                    stdout: [ready]
            - name: wrong-mode
              goss_rules:
                file:
                  $D/out/site.conf: {exists: true, mode: "0600"}
`,
		"bad.yaml": `
resources:
  - exec:
      - x:
          command: "true"
          health_checks:
            - goss_rules: {no_such_type: {}}
`})
	manifest := filepath.Join(dir, "manifest.yaml")
	ref := "file#" + dir + "/out/site.conf"
	r := runWith(t, runOpts{}, "apply", "--output", "json", manifest)
	wantCode(t, r, 1)
	status, got := decodeHealthReport(t, r).checks(t, ref)
	if status != "failed" {
		t.Errorf("%s: a goss rule failed, want failed, got %s", ref, status)
	}
	wantCheck(t, ref, got, "site", "OK", 1, "goss: 5 rules, 0 failed, 0 skipped", false)
	wantCheck(t, ref, got, "wrong-mode", "CRITICAL", 1, "goss: 2 rules, 1 failed, 0 skipped", false)
	if c := got["wrong-mode"]; !strings.Contains(c.Output, "File: "+dir+"/out/site.conf: mode:") {
		t.Errorf("wrong-mode: output should name the failed rule: %q", c.Output)
	}
	wantFile(t, filepath.Join(dir, "out", "site.conf"), "listen 80\n", 0o640)

	r = runWith(t, runOpts{}, "apply", "--monitor-only", manifest)
	wantCode(t, r, 1)
	if want := "failed       " + ref + ": health check failed: wrong-mode CRITICAL after 1 tries: File: " + dir + "/out/site.conf: mode:"; !strings.Contains(r.stdout, want) {
		t.Errorf("text output lacks %q:\n%s", want, r)
	}

	r = runWith(t, runOpts{}, "apply", filepath.Join(dir, "bad.yaml"))
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, `health_checks[0]: goss_rules: unknown field "no_such_type"`) {
		t.Errorf("an unknown goss type should fail the resource naming it:\n%s", r)
	}
}

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tests of what apply and run show (issue 20, items 1 to 3): a noop on a
// fresh host, diffs, the quiet output, the recap and detailed exit codes.

// openDir is a directory under a fresh temporary one, both world-searchable,
// so that the files the tests write there have diffs that may be shown.
func openDir(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	// The test's temporary directory and the one made in it.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

// TestNoopFreshHostExamples: the README's examples in noop on a host
// where nothing exists yet exit 0 and say "would create" for the directory
// and every file in it (they failed with "parent directory ... does not
// exist"), create nothing, and the real apply afterwards converges.
func TestNoopFreshHostExamples(t *testing.T) {
	t.Parallel()
	base := openDir(t)
	cueSrc, err := os.ReadFile(filepath.Join(moduleRoot, "examples", "cue", "manifest.cue"))
	if err != nil {
		t.Fatal(err)
	}
	cueDir := filepath.Join(base, "cue")
	cueManifest := writeFile(t, t.TempDir(), "manifest.cue", strings.ReplaceAll(string(cueSrc), "/tmp/manifold-cue", cueDir))
	for _, tc := range []struct {
		name, dir string
		args      []string
		files     []string
	}{
		{"hello", filepath.Join(base, "hello"),
			[]string{"--data", "dir=" + filepath.Join(base, "hello"), filepath.Join(moduleRoot, "examples", "hello", "manifest.yaml")},
			[]string{"motd", "app.conf"}},
		{"jet", filepath.Join(base, "jet"),
			[]string{"--data", "dir=" + filepath.Join(base, "jet"), "--fact", "env=prod", filepath.Join(moduleRoot, "examples", "jet", "manifest.yaml")},
			[]string{"api.conf", "admin.conf"}},
		{"cue", cueDir, []string{cueManifest}, []string{"www.conf", "api.conf", "admin.conf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runWith(t, runOpts{}, append([]string{"apply", "--noop"}, tc.args...)...)
			wantCode(t, r, 0)
			if !strings.Contains(r.stdout, "file#"+tc.dir+": would create directory") {
				t.Errorf("no 'would create directory' line for %s:\n%s", tc.dir, r)
			}
			for _, f := range tc.files {
				p := filepath.Join(tc.dir, f)
				if !strings.Contains(r.stdout, "file#"+p+": would create") {
					t.Errorf("no 'would create' line for %s:\n%s", p, r)
				}
				// The directory is world-searchable once created: the
				// content of the new file is shown.
				if !strings.Contains(r.stdout, "    +++ "+p+" (desired)") {
					t.Errorf("no diff under %s:\n%s", p, r)
				}
			}
			if strings.Contains(r.stdout, "does not exist") || !strings.Contains(r.stdout, "0 failed, 0 skipped") {
				t.Errorf("noop failed resources:\n%s", r)
			}
			wantAbsent(t, tc.dir)

			rep := apply(t, runOpts{}, 0, tc.args...)
			if rep.Status != "succeeded" || rep.Counts.Failed != 0 || rep.Counts.Changed == 0 {
				t.Fatalf("apply after the noop: %+v", rep)
			}
			for _, f := range tc.files {
				if _, err := os.Stat(filepath.Join(tc.dir, f)); err != nil {
					t.Errorf("apply did not create %s: %v", f, err)
				}
			}
		})
	}
}

// TestNoopAssumesDeclaredOwner: in noop, a file owned by a user a user
// resource of the run would create is "would create", not "unknown user".
func TestNoopAssumesDeclaredOwner(t *testing.T) {
	t.Parallel()
	dir := openDir(t)
	m := writeFile(t, t.TempDir(), "m.yaml", `resources:
  - {type: user, name: manifold-nosuch-user, ensure: present}
  - {type: file, name: "`+dir+`/owned", content: "x\n", owner: manifold-nosuch-user}
`)
	r := runWith(t, runOpts{}, "apply", "--noop", "--verbose", m)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "file#"+dir+"/owned: would create") {
		t.Errorf("want the owned file 'would create':\n%s", r)
	}
	wantAbsent(t, filepath.Join(dir, "owned"))
}

// TestDiffsShownAndRedacted: a content change has its unified diff under
// its line in text output, and in the report's "diff"; not world-readable
// and sensitive files have none; --no-color and NO_COLOR print no escape.
func TestDiffsShownAndRedacted(t *testing.T) {
	t.Parallel()
	dir := openDir(t)
	for name, content := range map[string]string{"open.conf": "port = 1\n", "secret.conf": "pw = old\n", "sens.conf": "token = old\n"} {
		writeFile(t, dir, name, content)
	}
	if err := os.Chmod(filepath.Join(dir, "secret.conf"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := writeFile(t, t.TempDir(), "m.yaml", `resources:
  - {type: file, name: "`+dir+`/open.conf", content: "port = 2\n", mode: "0644"}
  - {type: file, name: "`+dir+`/secret.conf", content: "pw = new\n", mode: "0600"}
  - {type: file, name: "`+dir+`/sens.conf", content: "token = new\n", sensitive: true}
`)
	r := runWith(t, runOpts{env: []string{"NO_COLOR=1"}}, "apply", "--noop", "--no-color", m)
	wantCode(t, r, 0)
	for _, want := range []string{
		"would change file#" + dir + "/open.conf: would update content",
		"    --- " + dir + "/open.conf\n    +++ " + dir + "/open.conf (desired)\n",
		"    -port = 1\n    +port = 2\n",
		"    diff hidden: " + dir + "/secret.conf is not readable by other users",
		"    content redacted (sensitive)",
		"recap: 0 to create, 3 to update, 0 to delete, 0 to refresh, 0 failed, 0 skipped, 0 stable",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("text output lacks %q:\n%s", want, r)
		}
	}
	for _, secret := range []string{"pw = ", "token = "} {
		if strings.Contains(r.stdout, secret) {
			t.Errorf("text output shows %q:\n%s", secret, r)
		}
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("colour escapes with --no-color:\n%s", r)
	}

	rep := apply(t, runOpts{}, 0, "--noop", m)
	var raw struct {
		Resources []struct {
			Ref  string `json:"ref"`
			Diff string `json:"diff"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(runWith(t, runOpts{}, "apply", "--noop", "--output", "json", m).stdout), &raw); err != nil {
		t.Fatal(err)
	}
	diffs := map[string]string{}
	for _, res := range raw.Resources {
		diffs[res.Ref] = res.Diff
	}
	if d := diffs["file#"+dir+"/open.conf"]; !strings.Contains(d, "-port = 1\n+port = 2\n") {
		t.Errorf("report diff of open.conf: %q", d)
	}
	if d := diffs["file#"+dir+"/secret.conf"]; !strings.HasPrefix(d, "diff hidden:") || strings.Contains(d, "pw") {
		t.Errorf("report diff of secret.conf: %q", d)
	}
	if d := diffs["file#"+dir+"/sens.conf"]; !strings.HasPrefix(d, "content redacted (sensitive)") {
		t.Errorf("report diff of sens.conf: %q", d)
	}
	if rep.Counts.Changed != 3 {
		t.Errorf("counts: %+v", rep.Counts)
	}
}

// TestQuietRecapAndDetailedExitCodes: by default stable resources get no
// line (--verbose prints them), the recap lists a failure with its whole
// error (every line of the command's output), and --detailed-exitcodes
// answers 0, 2, 4, 6 and 1 for invalid input.
func TestQuietRecapAndDetailedExitCodes(t *testing.T) {
	t.Parallel()
	dir := openDir(t)
	stable := writeFile(t, dir, "stable.conf", "same\n")
	m := writeFile(t, t.TempDir(), "m.yaml", `resources:
  - {type: file, name: "`+stable+`", content: "same\n"}
`)
	r := runWith(t, runOpts{}, "apply", "--detailed-exitcodes", m)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "stable       file#") {
		t.Errorf("a stable resource is printed without --verbose:\n%s", r)
	}
	if !strings.Contains(r.stdout, "recap: 0 created, 0 updated, 0 deleted, 0 refreshed, 0 failed, 0 skipped, 1 stable") {
		t.Errorf("no recap:\n%s", r)
	}
	r = runWith(t, runOpts{}, "apply", "--verbose", m)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "stable       file#"+stable+": in the desired state") {
		t.Errorf("--verbose does not print the stable resource:\n%s", r)
	}

	// Drift check: noop on a drifted file is 2 and changes nothing.
	drift := writeFile(t, t.TempDir(), "drift.yaml", `resources:
  - {type: file, name: "`+stable+`", content: "other\n"}
`)
	wantCode(t, runWith(t, runOpts{}, "apply", "--noop", "--detailed-exitcodes", drift), 2)
	if got := readFile(t, stable); got != "same\n" {
		t.Fatalf("noop changed the file: %q", got)
	}

	failing := `  - {type: exec, name: broken, command: "/bin/sh -c 'echo first >&2; echo second >&2; echo third-line >&2; exit 3'"}
`
	fail := writeFile(t, t.TempDir(), "fail.yaml", "resources:\n"+failing)
	r = runWith(t, runOpts{}, "apply", "--detailed-exitcodes", fail)
	wantCode(t, r, 4)
	rec := r.stdout[strings.Index(r.stdout, "recap:"):]
	for _, want := range []string{"0 failed", "failures:\n  exec#broken\n", "first", "second", "third-line"} {
		if want == "0 failed" {
			if !strings.Contains(rec, "1 failed") {
				t.Errorf("recap does not count the failure:\n%s", r)
			}
			continue
		}
		if !strings.Contains(rec, want) {
			t.Errorf("recap lacks %q (the whole error):\n%s", want, r)
		}
	}
	wantCode(t, runWith(t, runOpts{}, "apply", fail), 1) // without the flag, as before

	both := writeFile(t, t.TempDir(), "both.yaml", `ordering: graph
resources:
  - {type: file, name: "`+dir+`/new.conf", content: "new\n"}
`+failing)
	wantCode(t, runWith(t, runOpts{}, "apply", "--detailed-exitcodes", both), 6)

	bad := writeFile(t, t.TempDir(), "bad.yaml", "resources:\n  - {type: file, name: relative, nosuch: 1}\n")
	wantCode(t, runWith(t, runOpts{}, "apply", "--detailed-exitcodes", bad), 1)
	wantCode(t, runWith(t, runOpts{}, "apply", bad), 2)
	wantCode(t, runWith(t, runOpts{}, "apply", "--detailed-exitcodes", "--nosuch-flag", bad), 1)
}

// TestDistributedRunShowsDiffs: a run through a server, coordinator and
// worker processes carries the diff in the outcome to the follower's text
// output and the JSON report, and --detailed-exitcodes works there too.
func TestDistributedRunShowsDiffs(t *testing.T) {
	t.Parallel()
	c := distStart(t, "w1")
	dir := openDir(t)
	conf := writeFile(t, dir, "app.conf", "port = 1\n")
	m := writeFile(t, t.TempDir(), "site.yaml", `resources:
  - {type: file, name: "`+conf+`", content: "port = 2\n"}
`)
	r := c.run(t, "run", "--follow", "--noop", "--detailed-exitcodes", m)
	wantCode(t, r, 2)
	if !strings.Contains(r.stdout, "    -port = 1\n    +port = 2\n") || !strings.Contains(r.stdout, "recap: 0 to create, 1 to update") {
		t.Errorf("run --follow lacks the diff or the recap:\n%s", r)
	}
	r = c.run(t, "run", "--output", "json", m)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, `"diff": "--- `+conf) {
		t.Errorf("the report has no diff:\n%s", r)
	}
	wantFile(t, conf, "port = 2\n", 0o644)
	wantCode(t, c.run(t, "run", "--wait", "--detailed-exitcodes", m), 0)
}

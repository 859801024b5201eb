package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// lineCol returns the 1-based line and column of the first occurrence of
// needle in src, so tests name positions without hard-coding them.
func lineCol(t *testing.T, src, needle string) (int, int) {
	t.Helper()
	i := strings.Index(src, needle)
	if i < 0 {
		t.Fatalf("%q not in manifest", needle)
	}
	line := strings.Count(src[:i], "\n") + 1
	col := i - strings.LastIndex(src[:i], "\n")
	return line, col
}

// TestTypoExitsInvalid: a misspelled key stops the run before anything is
// applied, with the file, line, column and a suggestion.
func TestTypoExitsInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := filepath.Join(dir, "first")
	src := fmt.Sprintf(`resources:
  - file:
      - %s:
          content: "first\n"
      - %s:
          contnet: "second\n"
`, first, filepath.Join(dir, "second"))
	m := writeFile(t, dir, "typo.yaml", src)
	line, col := lineCol(t, src, "contnet")

	for _, cmd := range []string{"apply", "validate"} {
		r := runWith(t, runOpts{dir: dir}, cmd, m)
		wantCode(t, r, 2)
		prefix := fmt.Sprintf("%s:%d:%d: ", m, line, col)
		if !containsLine(r.stderr, prefix, "contnet", `did you mean "content"`) {
			t.Errorf("%s: want a line starting %q naming contnet with a suggestion:\n%s", cmd, prefix, r)
		}
		if r.stdout != "" {
			t.Errorf("%s: want nothing on stdout:\n%s", cmd, r)
		}
	}
	wantAbsent(t, first) // nothing was applied
}

// validateLine is the format of every validate error line:
// file:line:col: path: message.
var validateLine = regexp.MustCompile(`^(.+):(\d+):(\d+): (\S+): (.+)$`)

// TestValidate covers `manifold validate`: the output of a valid manifest,
// the file:line:col: path: message format of every error, and exit codes.
func TestValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := runOpts{dir: dir}

	valid := writeFile(t, dir, "valid.yaml", `
resources:
  - {type: file, name: /tmp/never-applied-a, content: a}
  - {type: exec, name: /bin/true, require: [file#/tmp/never-applied-a]}
`)
	r := runWith(t, o, "validate", valid)
	wantCode(t, r, 0)
	if want := valid + ": valid, 2 resources\n"; r.stdout != want {
		t.Errorf("valid manifest: want stdout %q, got:\n%s", want, r)
	}

	// Two schema errors in one manifest: both are reported, one per line.
	src := `resources:
  - file:
      - /tmp/never-applied-b:
          mode: "999"
  - exec:
      - check:
          command: /bin/true
          retrys: 2
`
	bad := writeFile(t, dir, "bad.yaml", src)
	r = runWith(t, o, "validate", bad)
	wantCode(t, r, 2)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 2 {
		t.Fatalf("want two error lines, got:\n%s", r)
	}
	modeLine, _ := lineCol(t, src, "mode:")
	retryLine, _ := lineCol(t, src, "retrys")
	wantPaths := []struct {
		line int
		path string
		msg  string
	}{
		{modeLine, "resources[0].file[0]./tmp/never-applied-b.mode", "999"},
		{retryLine, "resources[1].exec[0].check.retrys", `did you mean "retry"`},
	}
	for i, l := range lines {
		g := validateLine.FindStringSubmatch(l)
		if g == nil {
			t.Errorf("line %q is not file:line:col: path: message", l)
			continue
		}
		w := wantPaths[i]
		if g[1] != bad || g[2] != fmt.Sprint(w.line) || g[4] != w.path || !strings.Contains(g[5], w.msg) {
			t.Errorf("line %q: want %s:%d:COL: %s: ...%s...", l, bad, w.line, w.path, w.msg)
		}
	}

	// An unknown reference is a validation error too.
	refSrc := `resources:
  - file:
      - /tmp/never-applied-c:
          require: [file#/nope]
`
	ref := writeFile(t, dir, "ref.yaml", refSrc)
	r = runWith(t, o, "validate", ref)
	wantCode(t, r, 2)
	refLine, _ := lineCol(t, refSrc, "/tmp/never-applied-c")
	if g := validateLine.FindStringSubmatch(strings.TrimSpace(r.stderr)); g == nil || g[2] != fmt.Sprint(refLine) || !strings.Contains(g[5], "file#/nope") {
		t.Errorf("unknown reference: want %s:%d:COL: ...: ...file#/nope..., got:\n%s", ref, refLine, r)
	}

	// A YAML syntax error names the file and line.
	syntax := writeFile(t, dir, "syntax.yaml", "resources:\n  - file: [\n")
	r = runWith(t, o, "validate", syntax)
	wantCode(t, r, 2)
	if !strings.HasPrefix(r.stderr, syntax+":") {
		t.Errorf("syntax error: want stderr to start with %q, got:\n%s", syntax+":", r)
	}

	// Usage errors.
	for _, args := range [][]string{
		{"validate"},
		{"validate", filepath.Join(dir, "missing.yaml")},
		{"validate", valid, bad},
		{"validate", "--no-such-flag", valid},
	} {
		r := runWith(t, o, args...)
		wantCode(t, r, 2)
		if r.stderr == "" {
			t.Errorf("%v: want an explanation on stderr", args)
		}
	}
}

// TestDataOverride: --data beats the manifest's data, both template
// syntaxes render, values are YAML scalars, and lookup defaults apply.
func TestDataOverride(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	m := writeFile(t, dir, "m.yaml", `
data:
  greeting: hello
  port: 80
resources:
  - file:
      - `+out+`:
          content: "{{ lookup('data.greeting') }} ${ lookup('data.port') + 1 } {{ lookup('data.missing', 'fallback') }}\n"
`)
	apply(t, runOpts{dir: dir}, 0, m)
	wantFile(t, out, "hello 81 fallback\n", 0o644)

	rep := apply(t, runOpts{dir: dir}, 0, "--data", "greeting=bonjour", "--data", "port=8080", m)
	if got := rep.resource(t, "file#"+out).Status; got != "changed" {
		t.Errorf("override: want changed, got %s", got)
	}
	wantFile(t, out, "bonjour 8081 fallback\n", 0o644)
}

// TestMissingDataKey: a lookup without default of a key nobody set is
// invalid input naming the resource, and nothing is applied.
func TestMissingDataKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := filepath.Join(dir, "first")
	second := filepath.Join(dir, "second")
	m := writeFile(t, dir, "m.yaml", `
resources:
  - file:
      - `+first+`:
          content: "fine\n"
      - `+second+`:
          content: "{{ lookup('data.nope') }}\n"
`)
	r := runWith(t, runOpts{dir: dir}, "apply", m)
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "file#"+second) || !strings.Contains(r.stderr, "data.nope") {
		t.Errorf("want stderr naming file#%s and data.nope:\n%s", second, r)
	}
	wantAbsent(t, first)

	// The same key given on the command line makes it valid.
	apply(t, runOpts{dir: dir}, 0, "--data", "nope=given", m)
	wantFile(t, second, "given\n", 0o644)
}

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestFailingExec: a failing command fails the run (exit 1), skips what
// requires it, directly or not, and leaves unrelated resources applied.
func TestFailingExec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dependent := filepath.Join(dir, "dependent")
	transitive := filepath.Join(dir, "transitive")
	unrelated := filepath.Join(dir, "unrelated")
	m := writeFile(t, dir, "m.yaml", fmt.Sprintf(`
resources:
  - exec:
      - boom:
          command: "sh -c 'exit 3'"
  - file:
      - %[1]s:
          content: "never\n"
          require: [exec#boom]
      - %[2]s:
          content: "never\n"
          require: [file#%[1]s]
      - %[3]s:
          content: "applied\n"
`, dependent, transitive, unrelated))

	rep := apply(t, runOpts{dir: dir}, 1, m)
	if rep.Status != "failed" {
		t.Errorf("want run failed, got %s", rep.Status)
	}
	if want := (counts{Total: 4, Changed: 1, Failed: 1, Skipped: 2}); rep.Counts != want {
		t.Errorf("want counts %+v, got %+v", want, rep.Counts)
	}
	boom := rep.resource(t, "exec#boom")
	if boom.Status != "failed" || !strings.Contains(boom.Error, "3") {
		t.Errorf("exec#boom: want failed with an error naming exit code 3, got %+v", boom)
	}
	for _, p := range []string{dependent, transitive} {
		if res := rep.resource(t, "file#"+p); res.Status != "skipped" {
			t.Errorf("file#%s: want skipped, got %+v", p, res)
		}
		wantAbsent(t, p)
	}
	if res := rep.resource(t, "file#"+unrelated); res.Status != "changed" {
		t.Errorf("file#%s: want changed, got %+v", unrelated, res)
	}
	wantFile(t, unrelated, "applied\n", 0o644)

	// The text output tells a human which resource failed and why.
	r := runWith(t, runOpts{dir: dir}, "apply", m)
	wantCode(t, r, 1)
	if !containsLine(r.stdout, "failed", "exec#boom") || !containsLine(r.stdout, "skipped", "file#"+dependent) {
		t.Errorf("text output: want exec#boom failed and file#%s skipped:\n%s", dependent, r)
	}
}

// TestFailOnError: with fail_on_error the run stops dispatching after the
// first failure; resources after it are skipped even when unrelated.
func TestFailOnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	later := filepath.Join(dir, "later")
	m := writeFile(t, dir, "m.yaml", `
ccm:
  fail_on_error: true
  resources:
    - exec:
        - /bin/false: {}
    - file:
        - `+later+`:
            content: "never\n"
`)
	rep := apply(t, runOpts{dir: dir}, 1, m)
	if want := (counts{Total: 2, Failed: 1, Skipped: 1}); rep.Counts != want {
		t.Errorf("want counts %+v, got %+v", want, rep.Counts)
	}
	if got := rep.resource(t, "exec#/bin/false").Status; got != "failed" {
		t.Errorf("exec#/bin/false: want failed, got %s", got)
	}
	if res := rep.resource(t, "file#"+later); res.Status != "skipped" || res.Message == "" {
		t.Errorf("file#%s: want skipped with a reason, got %+v", later, res)
	}
	wantAbsent(t, later)
}

// TestSubscribeRefresh: a refreshonly exec runs when the file it
// subscribes to changes and only then; in noop the refresh is reported as
// would-change and the command does not run.
func TestSubscribeRefresh(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "app.conf")
	marker := filepath.Join(dir, "marker")
	m := writeFile(t, dir, "m.yaml", fmt.Sprintf(`
data:
  value: one
resources:
  - file:
      - %[1]s:
          content: "value={{ lookup('data.value') }}\n"
  - exec:
      - reload:
          command: "echo ran >> %[2]s"
          provider: shell
          refreshonly: true
          subscribe: [file#%[1]s]
`, conf, marker))
	o := runOpts{dir: dir}

	// Noop on a fresh system: both would change, nothing happens.
	rep := apply(t, o, 0, "--noop", m)
	reload := rep.resource(t, "exec#reload")
	if reload.Status != "changed" || !reload.Refreshed || !reload.Noop {
		t.Errorf("noop: exec#reload: want a would-change refresh, got %+v", reload)
	}
	if got := rep.resource(t, "file#"+conf).Status; got != "changed" {
		t.Errorf("noop: file: want would change, got %s", got)
	}
	wantAbsent(t, conf)
	wantAbsent(t, marker)

	// Apply: the file is created and the exec runs once.
	rep = apply(t, o, 0, m)
	if reload := rep.resource(t, "exec#reload"); reload.Status != "changed" || !reload.Refreshed {
		t.Errorf("apply: exec#reload: want changed by a refresh, got %+v", reload)
	}
	wantFile(t, marker, "ran\n", 0o644)

	// Unchanged file: no refresh, the command does not run.
	rep = apply(t, o, 0, m)
	if reload := rep.resource(t, "exec#reload"); reload.Status != "stable" || reload.Refreshed {
		t.Errorf("unchanged: exec#reload: want stable, got %+v", reload)
	}
	if got := readFile(t, marker); got != "ran\n" {
		t.Errorf("unchanged: marker: want one run, got %q", got)
	}

	// The file changes (new data): the command runs again.
	rep = apply(t, o, 0, "--data", "value=two", m)
	if reload := rep.resource(t, "exec#reload"); reload.Status != "changed" || !reload.Refreshed {
		t.Errorf("changed: exec#reload: want changed by a refresh, got %+v", reload)
	}
	wantFile(t, conf, "value=two\n", 0o644)
	if got := readFile(t, marker); got != "ran\nran\n" {
		t.Errorf("changed: marker: want two runs, got %q", got)
	}
}

// TestGraphOrdering: with ordering: graph, independent resources all run
// and an explicit require is still honoured (the file inside the directory
// is only written once the directory exists).
func TestGraphOrdering(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	var b strings.Builder
	b.WriteString("ordering: graph\nresources:\n")
	const n = 8
	var want []string
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("f%d", i))
		fmt.Fprintf(&b, "  - {type: file, name: %s, content: \"%d\\n\"}\n", p, i)
		want = append(want, "file#"+p)
	}
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("touched%d", i))
		fmt.Fprintf(&b, "  - {type: exec, name: touch%d, command: \"touch %s\", creates: %s}\n", i, p, p)
		want = append(want, fmt.Sprintf("exec#touch%d", i))
	}
	fmt.Fprintf(&b, "  - {type: file, name: %s/inner, content: inner, require: [file#%s]}\n", sub, sub)
	fmt.Fprintf(&b, "  - {type: file, name: %s, ensure: directory}\n", sub)
	want = append(want, "file#"+sub+"/inner", "file#"+sub)
	m := writeFile(t, dir, "m.yaml", b.String())

	rep := apply(t, runOpts{dir: dir}, 0, "--concurrency", "4", m)
	if rep.Counts.Total != len(want) || rep.Counts.Changed != len(want) {
		t.Errorf("want all %d changed, got %+v", len(want), rep.Counts)
	}
	for i, res := range rep.Resources {
		if i < len(want) && res.Ref != want[i] {
			t.Errorf("resources[%d]: want %s (declaration order), got %s", i, want[i], res.Ref)
		}
		if res.Status != "changed" {
			t.Errorf("%s: want changed, got %+v", res.Ref, res)
		}
	}
	for i := range n {
		wantFile(t, filepath.Join(dir, fmt.Sprintf("f%d", i)), fmt.Sprintf("%d\n", i), 0o644)
		readFile(t, filepath.Join(dir, fmt.Sprintf("touched%d", i)))
	}
	wantFile(t, filepath.Join(sub, "inner"), "inner", 0o644)

	// ordering: manifest refuses the same forward require.
	r := runWith(t, runOpts{dir: dir}, "validate", writeFile(t, dir, "manifest.yaml",
		strings.Replace(b.String(), "ordering: graph", "ordering: manifest", 1)))
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "file#"+sub) {
		t.Errorf("ordering: manifest: want an error naming the forward require file#%s:\n%s", sub, r)
	}
}

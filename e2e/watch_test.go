package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitOutput waits until the process has printed want on stdout, failing
// after timeout (or when the process exits first).
func waitOutput(t testing.TB, p *process, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		out := p.Stdout()
		if strings.Contains(out, want) {
			return out
		}
		select {
		case <-p.done:
			t.Fatalf("manifold exited before printing %q:\n%s\n--- stderr:\n%s", want, out, p.Stderr())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q not printed within %s:\n%s\n--- stderr:\n%s", want, timeout, out, p.Stderr())
		}
	}
}

func TestApplyWatchRepairsDrift(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "etc", "app.conf")
	reloads := filepath.Join(dir, "reloads")
	manifest := writeFile(t, dir, "site.yaml", fmt.Sprintf(`
resources:
  - file:
      - %[1]s:
          ensure: directory
          mode: "0755"
      - %[2]s:
          content: "port=80\n"
          mode: "0644"
  - exec:
      - reload:
          command: "/bin/sh -c 'echo reload >> %[3]s'"
          refreshonly: true
          subscribe: [file#%[2]s]
`, filepath.Dir(target), target, reloads))
	p := start(t, runOpts{dir: dir}, "apply", "--watch", "--interval", "1h", manifest)
	waitOutput(t, p, "watching:", 60*time.Second)
	if got := readFile(t, target); got != "port=80\n" {
		t.Fatalf("after the start run: %q", got)
	}
	if n := lineCount(t, reloads); n != 1 {
		t.Fatalf("%d reloads after the start run, want 1", n)
	}

	// A hand edit is repaired, and the subscriber refreshed.
	if err := os.WriteFile(target, []byte("port=9999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The line says what triggered the repair; the subscriber's says
	// it was refreshed.
	waitOutput(t, p, "changed      file#"+target+": updated content [drift: ", 20*time.Second)
	waitOutput(t, p, "[refresh]", 20*time.Second)
	if got := readFile(t, target); got != "port=80\n" {
		t.Fatalf("after the repair: %q", got)
	}
	if n := lineCount(t, reloads); n != 2 {
		t.Fatalf("%d reloads after the repair, want 2", n)
	}

	// A removal and a chmod are repaired too.
	before := strings.Count(p.Stdout(), "changed      file#"+target)
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	waitRepairs(t, p, "changed      file#"+target, before+1)
	if got := readFile(t, target); got != "port=80\n" {
		t.Fatalf("after the removal: %q", got)
	}
	before = strings.Count(p.Stdout(), "changed      file#"+target)
	if err := os.Chmod(target, 0o600); err != nil {
		t.Fatal(err)
	}
	waitRepairs(t, p, "changed      file#"+target, before+1)
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode after the chmod repair: %v %v", fi.Mode(), err)
	}

	// SIGTERM: the watch ends, exit 0, within seconds.
	if err := p.stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0\n%s", code, p.Stderr())
	}
	if !strings.Contains(p.Stdout(), "watch stopped") {
		t.Fatalf("no 'watch stopped':\n%s", p.Stdout())
	}
}

// waitRepairs waits until line has been printed n times.
func waitRepairs(t *testing.T, p *process, line string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(p.Stdout(), line) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%q printed %d times within 20s, want %d:\n%s", line, strings.Count(p.Stdout(), line), n, p.Stdout())
		}
		select {
		case <-p.done:
			t.Fatalf("manifold exited:\n%s\n%s", p.Stdout(), p.Stderr())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestApplyWatchNoopDetectsDriftOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "motd")
	if err := os.WriteFile(target, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := writeFile(t, dir, "site.yaml", fmt.Sprintf(`
resources:
  - file:
      - %s:
          content: "hello\n"
          mode: "0644"
`, target))
	p := start(t, runOpts{dir: dir}, "apply", "--watch", "--noop", manifest)
	waitOutput(t, p, "watching: reporting drift (noop", 60*time.Second)
	if err := os.WriteFile(target, []byte("tampered\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, "would change file#"+target+": would update content [drift: write "+target+"]", 20*time.Second)
	if got := readFile(t, target); got != "tampered\n" {
		t.Fatalf("noop --watch repaired the file: %q", got)
	}
	if err := p.stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d, want 0", code)
	}
}

func TestApplyWatchJSONOneReportPerRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "motd")
	manifest := writeFile(t, dir, "site.yaml", fmt.Sprintf(`
resources:
  - file:
      - %s:
          content: "hello\n"
`, target))
	p := start(t, runOpts{dir: dir}, "apply", "--watch", "--output", "json", manifest)
	waitOutput(t, p, `"trigger":"start"`, 60*time.Second)
	if err := os.WriteFile(target, []byte("tampered\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitRepairs(t, p, `"status":"changed"`, 2) // the start run's, then the repair's
	if err := p.stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	// JSON lines: every line one report; the first the start run with
	// the file created, then a drift run holding the repaired file.
	var reports []report
	for _, line := range strings.Split(strings.TrimSpace(p.Stdout()), "\n") {
		var r report
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		reports = append(reports, r)
	}
	if len(reports) < 2 || reports[0].Trigger != "start" || reports[0].statuses()["file#"+target] != "changed" {
		t.Fatalf("reports: %+v", reports)
	}
	repaired := false
	for _, r := range reports[1:] {
		s := r.statuses()
		if r.Trigger != "drift" || len(s) != 1 {
			t.Fatalf("after the start run, a %q run of %v: want drift runs of the file alone", r.Trigger, s)
		}
		repaired = repaired || s["file#"+target] == "changed"
	}
	if !repaired {
		t.Fatalf("no drift run repaired the file: %+v", reports)
	}
	if got := readFile(t, target); got != "hello\n" {
		t.Fatalf("after the repair: %q", got)
	}
}

// TestApplyWatchStormIsCoalesced: 2,000 edits of 40 managed files in a
// burst give a bounded number of repair runs, and every file ends
// repaired (the benchmark measures 10,000).
func TestApplyWatchStormIsCoalesced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const files, rounds = 40, 50
	var b strings.Builder
	b.WriteString("resources:\n  - file:\n")
	paths := make([]string, files)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("f%03d", i))
		fmt.Fprintf(&b, "      - %s:\n          content: \"v\\n\"\n", paths[i])
	}
	manifest := writeFile(t, dir, "site.yaml", b.String())
	p := start(t, runOpts{dir: dir}, "apply", "--watch", "--output", "json", manifest)
	waitOutput(t, p, `"trigger":"start"`, 60*time.Second)
	for r := range rounds {
		for _, path := range paths {
			if err := os.WriteFile(path, []byte(fmt.Sprintf("edit %d\n", r)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every file is repaired, by runs that each hold every file at most
	// once; far fewer runs than edits.
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := true
		for _, path := range paths {
			if b, err := os.ReadFile(path); err != nil || string(b) != "v\n" {
				ok = false
				break
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("files not all repaired within 60s")
		}
		select {
		case <-p.done:
			t.Fatalf("manifold exited: %s", p.Stderr())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := p.stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	runs := 0
	for _, line := range strings.Split(strings.TrimSpace(p.Stdout()), "\n") {
		var r report
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if r.Trigger != "drift" {
			continue
		}
		runs++
		seen := map[string]bool{}
		for _, res := range r.Resources {
			if seen[res.Ref] {
				t.Fatalf("run %s checks %s twice", r.RunID, res.Ref)
			}
			seen[res.Ref] = true
		}
	}
	if runs == 0 || runs > files*rounds/20 {
		t.Fatalf("%d repair runs for %d edits, want between 1 and %d", runs, files*rounds, files*rounds/20)
	}
	t.Logf("%d edits of %d files: %d repair runs", files*rounds, files, runs)
}

// TestApplyWatchStormRepairsEachFileOnce: a storm of one edit per file
// (500 files in 5 directories) is repaired by drift runs that hold each
// file once in all, every one changed: the hints are checked here before a
// run, so the events of a run's own writes (read after it, in the next
// batch) find their files stable and cost no run. Before, they were run
// again (a quarter to a third of the resources of a 10,000-edit storm's
// runs were such re-checks, stable).
func TestApplyWatchStormRepairsEachFileOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const files = 500
	var b strings.Builder
	b.WriteString("resources:\n  - file:\n")
	paths := make([]string, files+1)
	for i := range paths {
		d := filepath.Join(dir, fmt.Sprintf("d%d", i%5))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		paths[i] = filepath.Join(d, fmt.Sprintf("f%03d", i))
		if err := os.WriteFile(paths[i], []byte("v\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "      - %s:\n          content: \"v\\n\"\n", paths[i])
	}
	manifest := writeFile(t, dir, "site.yaml", b.String())
	p := start(t, runOpts{dir: dir}, "apply", "--watch", "--output", "json", manifest)
	waitOutput(t, p, `"trigger":"start"`, 60*time.Second)
	repaired := func(paths []string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for _, path := range paths {
			for {
				if b, err := os.ReadFile(path); err == nil && string(b) == "v\n" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s not repaired within 60s", path)
				}
				select {
				case <-p.done:
					t.Fatalf("manifold exited: %s", p.Stderr())
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
	}
	for _, path := range paths[:files] {
		if err := os.WriteFile(path, []byte("storm\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repaired(paths[:files])
	// A last edit once all are repaired: its hint is read after those of
	// the storm's runs' own writes, so once it is repaired every hint of
	// the storm has been handled.
	last := paths[files]
	if err := os.WriteFile(last, []byte("last\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repaired([]string{last})
	if err := p.stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	held := map[string]int{}
	runs := 0
	for _, line := range strings.Split(strings.TrimSpace(p.Stdout()), "\n") {
		var r report
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if r.Trigger != "drift" {
			continue
		}
		runs++
		for _, res := range r.Resources {
			held[res.Ref]++
			if res.Status != "changed" {
				t.Errorf("run %s holds %s %s: a drift run holds only what drifted", r.RunID, res.Ref, res.Status)
			}
		}
	}
	for _, path := range paths {
		if n := held["file#"+path]; n != 1 {
			t.Errorf("%s held by %d drift runs, want 1", path, n)
		}
	}
	if len(held) != len(paths) {
		t.Errorf("drift runs held %d resources, want %d", len(held), len(paths))
	}
	t.Logf("%d edits: %d repair runs", files+1, runs)
}

// TestApplyWatchFightIsBackedOff: another writer keeps changing a managed
// file; manifold repairs it a few times, then backs off and says the file
// is flapping, instead of spinning.
func TestApplyWatchFightIsBackedOff(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "contested")
	manifest := writeFile(t, dir, "site.yaml", fmt.Sprintf(`
resources:
  - file:
      - %s:
          content: "mine\n"
`, target))
	p := start(t, runOpts{dir: dir}, "apply", "--watch", manifest)
	waitOutput(t, p, "watching:", 60*time.Second)
	stop := make(chan struct{})
	fought := make(chan int)
	go func() { // the other writer: puts its content back whenever it is gone
		n := 0
		for {
			select {
			case <-stop:
				fought <- n
				return
			default:
			}
			if b, _ := os.ReadFile(target); string(b) != "theirs\n" {
				_ = os.WriteFile(target, []byte("theirs\n"), 0o644)
				n++
			}
			time.Sleep(time.Millisecond) // the other writer's own pace, not a synchronisation
		}
	}()
	waitOutput(t, p, "flapping: [file#"+target+"]", 30*time.Second)
	close(stop)
	<-fought
	repairs := strings.Count(p.Stdout(), "changed      file#"+target)
	if err := p.stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Damped: the first repairs of the window (3), then one per back-off.
	if repairs > 8 {
		t.Fatalf("%d repairs before flapping was reported: not backed off\n%s", repairs, p.Stdout())
	}
}

// TestWatchExample runs examples/watch as its comment tells a user to.
func TestWatchExample(t *testing.T) {
	t.Parallel()
	manifest := filepath.Join(moduleRoot, "examples", "watch", "manifest.yaml")
	dir := filepath.Join(t.TempDir(), "watch")
	conf, reloads := filepath.Join(dir, "app.conf"), filepath.Join(dir, "reloads.log")
	p := start(t, runOpts{}, "apply", "--watch", "--data", "dir="+dir, manifest)
	waitOutput(t, p, "watching:", 60*time.Second)
	want := readFile(t, conf)
	if err := os.Remove(conf); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, "[refresh]", 20*time.Second)
	if got := readFile(t, conf); got != want {
		t.Fatalf("app.conf after the repair: %q, want %q", got, want)
	}
	if n := lineCount(t, reloads); n != 2 {
		t.Fatalf("%d reloads, want 2 (the first apply, the repair)", n)
	}
}

// TestApplyWatchIntervalChecksLocally: the interval pass checks the cached
// plan in the process and runs only what drifted. A drift no event shows
// (a write through a hard link from an unwatched directory) is found by
// the pass and repaired by an interval run holding that file and its
// subscriber alone; a clean pass is one JSON line with the counts and no
// run; in text it prints nothing.
func TestApplyWatchIntervalChecksLocally(t *testing.T) {
	t.Parallel()
	for _, output := range []string{"json", "text"} {
		t.Run(output, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			etc, other := filepath.Join(dir, "etc"), filepath.Join(dir, "other")
			for _, d := range []string{etc, other} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			target := filepath.Join(etc, "app.conf")
			manifest := writeFile(t, dir, "site.yaml", fmt.Sprintf(`
resources:
  - file:
      - %[1]s/a.conf:
          content: "a\n"
      - %[2]s:
          content: "port=80\n"
      - %[1]s/b.conf:
          content: "b\n"
  - exec:
      - reload:
          command: "/bin/true"
          refreshonly: true
          subscribe: [file#%[2]s]
`, etc, target))
			p := start(t, runOpts{dir: dir}, "apply", "--watch", "--interval", "1s", "--output", output, "--log-level", "info", manifest)
			if output == "json" {
				waitOutput(t, p, `"checked":4,"drifted":0,"stable":4`, 60*time.Second)
			} else {
				before := waitOutput(t, p, "watching:", 60*time.Second)
				waitStderr(t, p, "interval check", 30*time.Second)
				if got := p.Stdout(); got != before {
					t.Fatalf("a clean pass printed %q", strings.TrimPrefix(got, before))
				}
			}
			// The drift no event shows.
			alias := filepath.Join(other, "alias")
			if err := os.Link(target, alias); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(alias, []byte("port=1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if output == "text" {
				waitOutput(t, p, "changed      file#"+target+": updated content [interval: drifted: ", 30*time.Second)
				waitOutput(t, p, "exec#reload", 10*time.Second)
				if got := readFile(t, target); got != "port=80\n" {
					t.Fatalf("after the interval repair: %q", got)
				}
				return
			}
			waitOutput(t, p, `"drifted":1,"stable":3,"drifted_resources":["file#`+target+`"]`, 30*time.Second)
			waitOutput(t, p, `"trigger":"interval","coordinator"`, 30*time.Second)
			var run *report
			for _, line := range strings.Split(strings.TrimSpace(p.Stdout()), "\n") {
				var r report
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("not a JSON line: %q: %v", line, err)
				}
				if r.RunID != "" && r.Trigger == "interval" {
					run = &r
					break
				}
			}
			if run == nil {
				t.Fatalf("no interval run:\n%s", p.Stdout())
			}
			s := run.statuses()
			if len(s) != 2 || s["file#"+target] != "changed" || s["exec#reload"] != "changed" {
				t.Fatalf("interval run of %v: want the drifted file (changed) and its subscriber (refreshed) alone", s)
			}
			if got := readFile(t, target); got != "port=80\n" {
				t.Fatalf("after the interval repair: %q", got)
			}
		})
	}
}

// waitStderr waits until the process has printed want on stderr.
func waitStderr(t *testing.T, p *process, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(p.Stderr(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("%q not on stderr within %s:\n%s", want, timeout, p.Stderr())
		}
		select {
		case <-p.done:
			t.Fatalf("manifold exited:\n%s", p.Stderr())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

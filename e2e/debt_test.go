package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRefreshOwedAcrossACrash: a file changes, the process is killed
// before the exec subscribed to it runs; the next apply (where the file
// is stable) still refreshes the exec, once.
func TestRefreshOwedAcrossACrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "app.conf")
	started, goOn := filepath.Join(dir, "started"), filepath.Join(dir, "go")
	reloads := filepath.Join(dir, "reloads")
	manifest := writeFile(t, dir, "site.yaml", fmt.Sprintf(`
resources:
  - file:
      - %[1]s:
          content: "v1\n"
  - exec:
      - between:
          command: "/bin/sh -c 'touch %[2]s; while [ ! -e %[3]s ]; do sleep 0.05; done'"
      - reload:
          command: "/bin/sh -c 'echo reload >> %[4]s'"
          refreshonly: true
          subscribe: [file#%[1]s]
`, conf, started, goOn, reloads))
	p := start(t, runOpts{dir: dir}, "apply", manifest)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exec between the change and the refresh never started:\n%s\n%s", p.Stdout(), p.Stderr())
		}
		select {
		case <-p.done:
			t.Fatalf("apply ended early:\n%s\n%s", p.Stdout(), p.Stderr())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got := readFile(t, conf); got != "v1\n" {
		t.Fatalf("the file was not changed before the crash: %q", got)
	}
	_ = p.cmd.Process.Kill() // SIGKILL: no chance to run the refresh
	<-p.done
	if _, err := os.Stat(reloads); err == nil {
		t.Fatal("the refresh ran before the crash")
	}
	writeFile(t, dir, "go", "")

	// The file is stable now: only the debt makes the exec run.
	rep := apply(t, runOpts{dir: dir}, 0, manifest)
	if s := rep.statuses(); s["file#"+conf] != "stable" || s["exec#reload"] != "changed" {
		t.Fatalf("after the crash: %v, want the file stable and the owed refresh run", s)
	}
	if n := lineCount(t, reloads); n != 1 {
		t.Fatalf("%d reloads, want 1", n)
	}
	// Paid: the next apply does not refresh again.
	rep = apply(t, runOpts{dir: dir}, 0, manifest)
	if s := rep.statuses(); s["exec#reload"] == "changed" {
		t.Fatalf("the refresh ran again: %v", s)
	}
	if n := lineCount(t, reloads); n != 1 {
		t.Fatalf("%d reloads, want 1", n)
	}
}

// TestRefreshOwedAfterAFailedSubscriber: the subscriber fails when
// refreshed; the next apply refreshes it again until it succeeds.
func TestRefreshOwedAfterAFailedSubscriber(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "app.conf")
	ok, reloads := filepath.Join(dir, "ok"), filepath.Join(dir, "reloads")
	manifest := writeFile(t, dir, "site.yaml", fmt.Sprintf(`
resources:
  - file:
      - %[1]s:
          content: "v1\n"
  - exec:
      - reload:
          command: "/bin/sh -c 'test -e %[2]s && echo reload >> %[3]s'"
          refreshonly: true
          subscribe: [file#%[1]s]
`, conf, ok, reloads))
	rep := apply(t, runOpts{dir: dir}, 1, manifest)
	if s := rep.statuses(); s["exec#reload"] != "failed" {
		t.Fatalf("first apply: %v", s)
	}
	// Still failing: still owed.
	rep = apply(t, runOpts{dir: dir}, 1, manifest)
	if s := rep.statuses(); s["file#"+conf] != "stable" || s["exec#reload"] != "failed" {
		t.Fatalf("second apply: %v, want the owed refresh tried again", s)
	}
	writeFile(t, dir, "ok", "")
	rep = apply(t, runOpts{dir: dir}, 0, manifest)
	if s := rep.statuses(); s["exec#reload"] != "changed" || lineCount(t, reloads) != 1 {
		t.Fatalf("third apply: %v", s)
	}
	rep = apply(t, runOpts{dir: dir}, 0, manifest)
	if s := rep.statuses(); s["exec#reload"] == "changed" || lineCount(t, reloads) != 1 {
		t.Fatalf("fourth apply refreshed again: %v", s)
	}
}

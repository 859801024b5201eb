package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

func intp(i int) *int { return &i }

// TestLiveProgress: on a terminal the printer keeps a status line (done of
// total across the run tree, running resources, failures) under the
// finished-resource lines, and erases it before each line and the summary.
func TestLiveProgress(t *testing.T) {
	var out bytes.Buffer
	p := &progressPrinter{w: &out, live: true}
	for _, ev := range []bus.Event{
		{Kind: bus.EventRunStarted, RunID: "r", RootRunID: "r", Total: 2},
		{Kind: bus.EventTaskDispatched, RunID: "r", RootRunID: "r", Task: intp(0), Ref: "exec#a"},
		{Kind: bus.EventTaskDispatched, RunID: "r", RootRunID: "r", Task: intp(1), Ref: "apply#sub.yaml"},
		{Kind: bus.EventRunStarted, RunID: "c", RootRunID: "r", Manifest: "sub.yaml", Total: 1},
		{Kind: bus.EventTaskFinished, RunID: "r", RootRunID: "r", Task: intp(0), Ref: "exec#a", Status: "failed",
			Outcome: bus.TaskFailed, Error: "exec#a: exited with code 1", Worker: "w1"},
	} {
		p.event(ev)
	}
	got := out.String()
	last := got[strings.LastIndex(got, "\n")+1:]
	if want := "[1/3] running: apply#sub.yaml | 1 failed"; last != want {
		t.Fatalf("status line %q, want %q\nall: %q", last, want, got)
	}
	if !strings.Contains(got, clearLine+"failed       exec#a: exited with code 1 (0ms)\n") {
		t.Fatalf("the finished line is not printed on a cleared line: %q", got)
	}
	out.Reset()
	p.summary(&coordinator.Report{RunID: "r", Status: coordinator.RunFailed})
	if !strings.HasPrefix(out.String(), clearLine+"recap: ") || !strings.Contains(out.String(), "\nrun r failed") {
		t.Fatalf("summary does not erase the status line before the recap and the run line: %q", out.String())
	}
}

func TestPlainProgressWhenNotATerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f, func(string) string { return "xterm" }) {
		t.Fatal("a regular file is not a terminal")
	}
	if isTerminal(&bytes.Buffer{}, nil) {
		t.Fatal("a buffer is not a terminal")
	}
	var out bytes.Buffer
	p := &progressPrinter{w: &out}
	p.event(bus.Event{Kind: bus.EventRunStarted, RunID: "r", Total: 1})
	p.event(bus.Event{Kind: bus.EventTaskFinished, RunID: "r", Task: intp(0), Ref: "file#/x", Status: "changed",
		Outcome: bus.TaskChanged, Message: "created", Worker: "w1", DurationMS: 3})
	if got, want := out.String(), "changed      file#/x: created (3ms)\n"; got != want {
		t.Fatalf("plain output %q, want %q", got, want)
	}
}

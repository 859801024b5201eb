package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// TestQuietByDefault: without --verbose a stable resource gets no line, a
// change gets its line and its diff indented under it, a failure its
// line; with verbose every resource is printed; colours only when asked.
func TestQuietByDefault(t *testing.T) {
	events := []bus.Event{
		{Kind: bus.EventTaskFinished, RunID: "r", Task: intp(0), Ref: "file#/a", Status: "stable", Outcome: bus.TaskStable, Worker: "w"},
		{Kind: bus.EventTaskFinished, RunID: "r", Task: intp(1), Ref: "file#/b", Status: "changed", Outcome: bus.TaskChanged,
			Message: "updated content", Diff: "--- /b\n+++ /b (desired)\n@@\n-x\n+y\n", Worker: "w"},
		{Kind: bus.EventTaskFinished, RunID: "r", Task: intp(2), Ref: "exec#c", Status: "failed", Outcome: bus.TaskFailed,
			Error: "exec#c: exit 1\nline two", Worker: "w"},
	}
	print := func(p *progressPrinter) string {
		var out bytes.Buffer
		p.w = &out
		for _, ev := range events {
			p.event(ev)
		}
		return out.String()
	}
	got := print(&progressPrinter{})
	want := "changed      file#/b: updated content (0ms)\n    --- /b\n    +++ /b (desired)\n    @@\n    -x\n    +y\n" +
		"failed       exec#c: exit 1 … (0ms)\n"
	if got != want {
		t.Fatalf("default output:\n%q\nwant\n%q", got, want)
	}
	if got := print(&progressPrinter{verbose: true}); !strings.HasPrefix(got, "stable       file#/a: in the desired state (0ms)\n") {
		t.Fatalf("verbose output lacks the stable line:\n%s", got)
	}
	got = print(&progressPrinter{color: true})
	for _, want := range []string{ansiYellow + "changed     " + ansiReset, "    " + ansiRed + "-x" + ansiReset, "    " + ansiGreen + "+y" + ansiReset,
		ansiRed + "failed      " + ansiReset} {
		if !strings.Contains(got, want) {
			t.Errorf("coloured output lacks %q:\n%q", want, got)
		}
	}
}

func TestUseColor(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	var buf bytes.Buffer
	if useColor(&buf, env("TERM", "xterm"), false) {
		t.Error("a buffer is not a terminal: no colour")
	}
	// A terminal is not available in tests; the flags win before it is
	// looked at.
	if useColor(&buf, env("TERM", "xterm", "NO_COLOR", "1"), false) || useColor(&buf, env(), true) {
		t.Error("NO_COLOR or --no-color: no colour")
	}
}

// TestRecap: counts by kind of change across the run tree (a child run's
// resources counted, not its apply resource), and every failure with its
// whole error, every line (the progress line cuts it at the first).
func TestRecap(t *testing.T) {
	rep := &coordinator.Report{RunID: "r", Status: coordinator.RunFailed, Counts: coordinator.Counts{Failed: 1},
		Resources: []coordinator.ResourceReport{
			{Ref: "file#/a", Status: "changed", Message: "created"},
			{Ref: "file#/b", Status: "changed", Message: "updated content"},
			{Ref: "file#/c", Status: "changed", Message: "removed file"},
			{Ref: "exec#d", Status: "changed", Message: "ran x", Refreshed: true},
			{Ref: "file#/e", Status: "stable"},
			{Ref: "exec#f", Status: "failed", Error: "exec#f: apply: exit status 3\nstderr:\nfirst\nsecond"},
			{Ref: "exec#g", Status: "skipped"},
			{Ref: "apply#sub", Name: "sub.yaml", Status: "changed", Child: &coordinator.Report{Resources: []coordinator.ResourceReport{
				{Ref: "package#nginx", Status: "changed", Message: "install"},
				{Ref: "exec#h", Status: "failed", Error: "boom"},
			}}},
		}}
	var out bytes.Buffer
	printRecap(&out, rep, false)
	want := `recap: 2 created, 1 updated, 1 deleted, 1 refreshed, 2 failed, 1 skipped, 1 stable
failures:
  exec#f
    apply: exit status 3
    stderr:
    first
    second
  [sub.yaml] exec#h
    boom
`
	if out.String() != want {
		t.Fatalf("recap:\n%s\nwant\n%s", out.String(), want)
	}
	rep.Noop = true
	out.Reset()
	printRecap(&out, rep, false)
	if !strings.HasPrefix(out.String(), "recap: 2 to create, 1 to update, 1 to delete, 1 to refresh,") {
		t.Fatalf("noop recap: %s", out.String())
	}
}

func TestDetailedExitCodes(t *testing.T) {
	res := func(statuses ...string) *coordinator.Report {
		rep := &coordinator.Report{}
		for _, s := range statuses {
			rep.Resources = append(rep.Resources, coordinator.ResourceReport{Status: s, Message: "x"})
			if s == "failed" {
				rep.Counts.Failed++
			}
		}
		return rep
	}
	for _, tc := range []struct {
		rep  *coordinator.Report
		want int
	}{
		{res("stable", "stable"), 0},
		{res("stable", "changed"), 2},
		{res("failed", "skipped"), 4},
		{res("changed", "failed"), 6},
		{res(), 0},
	} {
		if got := detailedExit(tc.rep); got != tc.want {
			t.Errorf("%+v: got %d, want %d", tc.rep.Resources, got, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want int
	}{
		{[]string{"--detailed-exitcodes", "m.yaml"}, detailedBase + 2, 2},
		{[]string{"--detailed-exitcodes", "m.yaml"}, detailedBase + 0, 0},
		{[]string{"-detailed-exitcodes=true", "m.yaml"}, ExitInvalid, ExitFailed},
		{[]string{"--detailed-exitcodes=false", "m.yaml"}, ExitInvalid, ExitInvalid},
		{[]string{"m.yaml"}, ExitInvalid, ExitInvalid},
		{[]string{"--", "--detailed-exitcodes"}, ExitInvalid, ExitInvalid},
		{[]string{"detailed-exitcodes"}, ExitInvalid, ExitInvalid},
		{[]string{"--detailed-exitcodes", "m.yaml"}, ExitUnavailable, ExitUnavailable},
	} {
		if got := detailedExitCode(tc.args, tc.code); got != tc.want {
			t.Errorf("%v exit %d: got %d, want %d", tc.args, tc.code, got, tc.want)
		}
	}
}

package cli

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

// TestWriteReportMatchesEncoder: the report printed by apply, run and
// status (--output json) and the watch's report lines are byte for byte
// what json.Encoder printed (indented by two spaces, or not), for a report
// with every field set, a nested child, HTML, control and non-ASCII
// characters, an empty one and one with no resources.
func TestWriteReportMatchesEncoder(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 27, 10, 4, 5, 123456789, time.FixedZone("x", 3600))
	child := &coordinator.Report{RunID: "child", Status: coordinator.RunSucceeded, Depth: 1, StartedAt: &at,
		Resources: []coordinator.ResourceReport{{Ref: "file#/c", Type: "file", Name: "/c", Status: "stable"}}}
	full := &coordinator.Report{
		RunID: "01JRUN", Manifest: "site.yaml", Status: coordinator.RunFailed, Noop: true, HealthCheckOnly: true,
		Depth: 2, DurationMS: 1234, TraceID: "abc", Counts: coordinator.Counts{Total: 3, Changed: 1, Stable: 1},
		RootRunID: "root", ParentRunID: "parent", Pool: "web", Trigger: "drift", Assignment: "a", AssignmentVersion: 7,
		Coordinator: "c1", Error: "bad <thing> & \"quoted\"\n\ttab \u2028 \x01", StartedAt: &at, FinishedAt: &at,
		PreMessage: "héllo ✓", PostMessage: "bye", Page: &coordinator.ReportPage{Offset: 1, Count: 2, Total: 3},
		NoAnswer: []string{"host-1", "host-2"}, Offline: true, ReportedBy: "w1",
		Resources: []coordinator.ResourceReport{
			{Ref: "file#/etc/a", Type: "file", Name: "/etc/a", Alias: "a", Status: "changed", Noop: true, Refreshed: true,
				Message: "updated content", DurationMS: 3, Worker: "w1", Attempts: 2, Pool: "web",
				Diff:         "--- a\n+++ b\n@@ -1 +1 @@\n-<old>\n+new & \"x\"\n",
				HealthChecks: []bus.HealthCheck{{Name: "h", Status: "OK", Output: "fine\n", Tries: 1, Ignored: true}}},
			{Ref: "apply#child", Type: "apply", Name: "child", Status: "changed", Child: child, ChildRunID: "child"},
			{Ref: "exec#x", Type: "exec", Name: "x", Status: "failed", Error: "exit 1: \xff invalid utf-8"},
		},
	}
	for name, rep := range map[string]*coordinator.Report{"full": full, "empty": {}, "no resources": {RunID: "r", Resources: []coordinator.ResourceReport{}}} {
		for _, indent := range []bool{true, false} {
			var want, got bytes.Buffer
			enc := json.NewEncoder(&want)
			if indent {
				enc.SetIndent("", "  ")
			}
			if err := enc.Encode(rep); err != nil {
				t.Fatal(err)
			}
			if err := writeReport(&got, rep, indent); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("%s, indent %v:\n got %s\nwant %s", name, indent, got.Bytes(), want.Bytes())
			}
		}
	}
}

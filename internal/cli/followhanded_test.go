package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/coordinator"
)

// With --output json and the embedded coordinator's hand-over, the report
// is printed as soon as it is handed over, before the run's end is
// recorded (run_finished), and the command then waits for that end: the
// exit code is the report's. A run_finished that does not come is waited
// for handedEndWait, then said on stderr. Events that end first (a
// rejected run, an error) are followRun's to handle, and so is a report
// that is not whole (it is read from the store).
func TestFollowHandedPrintsTheReportFirst(t *testing.T) {
	failed := &coordinator.Report{RunID: "r1", Manifest: "m.yaml", Status: coordinator.RunFailed,
		Counts: coordinator.Counts{Total: 1, Failed: 1}, Resources: []coordinator.ResourceReport{{Ref: "exec#x", Type: "exec", Name: "x", Status: "failed"}}}
	data, err := coordinator.MarshalReport(failed)
	require.NoError(t, err)
	handOver := func() (*reportHandoff, <-chan struct{}) {
		h := &reportHandoff{}
		h.want("r1")
		return h, h.handed("r1")
	}

	// The report printed while the events still wait for the run's end.
	h, ready := handOver()
	var out, errOut syncBuffer
	st := IO{Stdout: &out, Stderr: &errOut}
	release := make(chan struct{})
	followed := make(chan struct{})
	printedFirst := make(chan bool, 1)
	go func() {
		<-followed
		h.put("r1", failed, data)
		// The report on stdout while the run's end is held back.
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(out.String(), `"status": "failed"`) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		printedFirst <- strings.Contains(out.String(), `"status": "failed"`)
		close(release)
	}()
	code, printed, err := followHanded(t.Context(), st, "r1", followOpts{output: "json", reports: h}, ready, func(ctx context.Context) error {
		close(followed)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	require.NoError(t, err)
	require.True(t, <-printedFirst, "the report was not printed before the run's end")
	require.True(t, printed)
	require.Equal(t, ExitFailed, code)
	require.Equal(t, string(stdIndent(t, data))+"\n", out.String())
	require.Empty(t, errOut.String())

	// A run_finished that never comes: waited for handedEndWait.
	defer func(d time.Duration) { handedEndWait = d }(handedEndWait)
	handedEndWait = 50 * time.Millisecond
	h, ready = handOver()
	h.put("r1", failed, data)
	out, errOut = syncBuffer{}, syncBuffer{}
	code, printed, err = followHanded(t.Context(), IO{Stdout: &out, Stderr: &errOut}, "r1", followOpts{output: "json", reports: h}, ready, func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	require.NoError(t, err)
	require.True(t, printed)
	require.Equal(t, ExitFailed, code)
	require.Contains(t, errOut.String(), errEndNotRecorded.Error())

	// The events end first: nothing printed, their error handed back.
	h, ready = handOver()
	out = syncBuffer{}
	boom := errors.New("boom")
	_, printed, err = followHanded(t.Context(), IO{Stdout: &out, Stderr: &errOut}, "r1", followOpts{output: "json", reports: h}, ready,
		func(context.Context) error { return boom })
	require.ErrorIs(t, err, boom)
	require.False(t, printed)
	require.Empty(t, out.String())

	// A report that is not whole (a child run's to nest): not printed
	// here, the events followed to the run's end.
	h, ready = handOver()
	parent := &coordinator.Report{RunID: "r1", Status: coordinator.RunSucceeded, Resources: []coordinator.ResourceReport{{Ref: "apply#c", ChildRunID: "r2"}}}
	pdata, err := coordinator.MarshalReport(parent)
	require.NoError(t, err)
	h.put("r1", parent, pdata)
	out = syncBuffer{}
	_, printed, err = followHanded(t.Context(), IO{Stdout: &out, Stderr: &errOut}, "r1", followOpts{output: "json", reports: h}, ready,
		func(context.Context) error { return nil })
	require.NoError(t, err)
	require.False(t, printed)
	require.Empty(t, out.String())
}

// TestReportHandoffKeepsWholeReports: the embedded coordinator's
// hand-over keeps (and so does not store) a report its CLI wants and
// takes whole; a report wanted but not whole (a child run's to nest, a
// failed run's post_message), one not wanted or handed over twice is
// stored.
func TestReportHandoffKeepsWholeReports(t *testing.T) {
	ok := &coordinator.Report{RunID: "r1", Status: coordinator.RunSucceeded, Resources: []coordinator.ResourceReport{{Ref: "file#/a"}}}
	nests := &coordinator.Report{RunID: "r1", Status: coordinator.RunSucceeded, Resources: []coordinator.ResourceReport{{Ref: "apply#c", ChildRunID: "r2"}}}
	failedWithMessage := &coordinator.Report{RunID: "r1", Status: coordinator.RunFailed, PostMessage: "see the log"}
	for _, tc := range []struct {
		name   string
		rep    *coordinator.Report
		wanted bool
		kept   bool
	}{
		{"whole and wanted", ok, true, true},
		{"not wanted", ok, false, false},
		{"a child's report to nest", nests, true, false},
		{"a failed run's post_message", failedWithMessage, true, false},
	} {
		h := &reportHandoff{}
		if tc.wanted {
			h.want("r1")
		}
		require.Equal(t, tc.kept, h.put("r1", tc.rep, []byte("{}")), tc.name)
		require.False(t, h.put("r1", tc.rep, []byte("{}")), "%s: handed over again", tc.name)
		_, taken := h.take("r1")
		require.Equal(t, tc.kept, taken, "%s: what is kept is taken", tc.name)
	}
}

package coordinator

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
)

// A worker's outcome, nearly every fact of a run's history, is verified
// with its task's token first: two MACs (the token, the outcome's), not a
// failed fact MAC before them. A child run's outcome (a coordinator's fact
// of kind outcome) pays the third instead. Measured by allocations, which
// each MAC makes alike.
func TestVerifyWorkerOutcomeFirst(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, bus.RunSecretSize)
	rec := &record{RunID: "r1", Secret: secret}
	worker := bus.Outcome{RunID: "r1", Task: 3, Attempt: 1, Ref: "file#/etc/motd", Status: bus.TaskStable, Worker: "w1"}
	bus.SignOutcome(&worker, bus.TaskToken(secret, "r1", 3, 1))
	child := bus.Outcome{RunID: "r1", Task: 4, Attempt: 1, Ref: "apply#child.yaml", Status: bus.TaskChanged, Worker: "coordinator c1"}
	bus.SignFact(&child, secret)
	deadline := bus.Outcome{RunID: "r1", Kind: bus.FactDeadline, Task: 5, Attempt: 1, Status: bus.TaskFailed}
	bus.SignFact(&deadline, secret)
	for _, o := range []bus.Outcome{worker, child, deadline} {
		require.NoError(t, verifyFact(rec, o), "%+v", o)
	}
	forged := worker
	forged.Status = bus.TaskChanged
	require.ErrorIs(t, verifyFact(rec, forged), errForged)

	if raceEnabled {
		t.Skip("sync.Pool drops items at random under -race: allocation counts are compared without it")
	}
	cost := func(o bus.Outcome) float64 {
		return testing.AllocsPerRun(50, func() { _ = verifyFact(rec, o) })
	}
	w, c, d := cost(worker), cost(child), cost(deadline)
	t.Logf("allocations per verification: worker outcome %.0f, child outcome %.0f, deadline %.0f", w, c, d)
	require.Less(t, w, c, "a worker's outcome costs less to verify than a child run's")
	require.Greater(t, w, d, "a deadline fact is verified with one MAC")
}

// A run checks the outcome of a task it dispatched with the token it
// signed the task with: one MAC, not the token derived again. Outcomes
// it did not dispatch (a replayed history), a second copy, a forgery or
// another attempt's go through verifyFact as before.
func TestRunVerifiesWithKeptTokens(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, bus.RunSecretSize)
	rec := &record{RunID: "r1", Secret: secret}
	r := &run{rec: rec}
	task := bus.Task{RunID: "r1", Task: 3, Attempt: 1, Segment: []bus.SegmentItem{{Task: 4, Attempt: 1}}}
	signTask(rec, &task)
	r.keepTokens(task)
	outcome := func(i int) bus.Outcome {
		o := bus.Outcome{RunID: "r1", Task: i, Attempt: 1, Ref: "file#/f", Status: bus.TaskStable, Worker: "w1"}
		bus.SignOutcome(&o, bus.TaskToken(secret, "r1", i, 1))
		return o
	}
	if !raceEnabled {
		kept := testing.AllocsPerRun(50, func() {
			r.keepTokens(task)
			_ = r.verify(outcome(4))
		}) - testing.AllocsPerRun(50, func() {
			r.keepTokens(task)
			_ = outcome(4)
		})
		derived := testing.AllocsPerRun(50, func() { _ = verifyFact(rec, outcome(4)) }) -
			testing.AllocsPerRun(50, func() { _ = outcome(4) })
		t.Logf("allocations of a check: kept token %.0f, derived %.0f", kept, derived)
		require.Less(t, kept, derived)
	} // else: sync.Pool drops items at random under -race; the behaviour below is still checked

	r.keepTokens(task)
	require.NoError(t, r.verify(outcome(3)))
	require.NoError(t, r.verify(outcome(3)), "a second copy is checked as before")
	require.NotContains(t, r.tokens, taskAttempt{3, 1}, "a checked attempt's token is dropped")
	forged := outcome(4)
	forged.Status = bus.TaskChanged
	require.ErrorIs(t, r.verify(forged), errForged)
	other := outcome(9) // not dispatched by this coordinator: verified by derivation
	require.NoError(t, r.verify(other))
	unsigned := outcome(4)
	unsigned.MAC = ""
	require.ErrorIs(t, r.verify(unsigned), errUnsigned)
}

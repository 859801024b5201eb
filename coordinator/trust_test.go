package coordinator

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
)

// verifyFact accepts a worker outcome only with its task attempt's token,
// a coordinator's fact only with the run's secret: a worker holding one
// task's token can sign neither another task's outcome nor a cancellation.
func TestVerifyFact(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, bus.RunSecretSize)
	rec := &record{RunID: "r1", Secret: secret}
	token := bus.TaskToken(secret, "r1", 3, 1)
	signed := func(o bus.Outcome, token string) bus.Outcome { bus.SignOutcome(&o, token); return o }
	fact := func(o bus.Outcome, key []byte) bus.Outcome { bus.SignFact(&o, key); return o }
	outcome := bus.Outcome{RunID: "r1", Task: 3, Attempt: 1, Status: bus.TaskChanged, Changed: true, Worker: "w1"}
	cancel := bus.Outcome{RunID: "r1", Kind: bus.FactCancel}
	for _, tc := range []struct {
		name string
		rec  *record
		o    bus.Outcome
		want error
	}{
		{"worker outcome with its token", rec, signed(outcome, token), nil},
		{"unsigned outcome", rec, outcome, errUnsigned},
		{"made-up mac", rec, func() bus.Outcome { o := outcome; o.MAC = "00"; return o }(), errForged},
		{"another attempt's token", rec, signed(outcome, bus.TaskToken(secret, "r1", 3, 2)), errForged},
		{"another run's token", rec, signed(outcome, bus.TaskToken(secret, "r2", 3, 1)), errForged},
		{"status changed after signing", rec, func() bus.Outcome { o := signed(outcome, token); o.Status = bus.TaskFailed; return o }(), errForged},
		{"replayed keeps its mac", rec, func() bus.Outcome { o := signed(outcome, token); o.Replayed, o.Delivery = true, 4; return o }(), nil},
		{"cancel signed with a task token", rec, signed(bus.Outcome{RunID: "r1", Task: 3, Attempt: 1, Kind: bus.FactCancel}, token), errForged},
		{"cancel signed with the secret", rec, fact(cancel, secret), nil},
		{"child outcome signed with the secret", rec, fact(bus.Outcome{RunID: "r1", Task: 5, Attempt: 1, Status: bus.TaskStable}, secret), nil},
		{"child's cancel signed with the parent's secret", &record{RunID: "r1-a5", Secret: bus.ChildSecret(secret, "r1-a5")},
			fact(bus.Outcome{RunID: "r1-a5", Kind: bus.FactCancel}, secret), errForged},
		{"child's cancel signed with its derived secret", &record{RunID: "r1-a5", Secret: bus.ChildSecret(secret, "r1-a5")},
			fact(bus.Outcome{RunID: "r1-a5", Kind: bus.FactCancel}, bus.ChildSecret(secret, "r1-a5")), nil},
		{"run of an earlier version", &record{RunID: "r1"}, outcome, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, verifyFact(tc.rec, tc.o), tc.want)
		})
	}
}

// A new run gets a random secret, a child run one derived from its
// parent's (so the parent's coordinator can sign the child's
// cancellation), and every item of a task message its own token.
func TestRunSecretsAndTaskTokens(t *testing.T) {
	a, b := &record{RunID: "r1"}, &record{RunID: "r2"}
	require.NoError(t, newSecret(a, nil))
	require.NoError(t, newSecret(b, nil))
	require.Len(t, a.Secret, bus.RunSecretSize)
	require.NotEqual(t, a.Secret, b.Secret)
	child := &record{RunID: "r1-a2"}
	require.NoError(t, newSecret(child, &childOf{parent: a}))
	require.Equal(t, bus.ChildSecret(a.Secret, "r1-a2"), child.Secret)

	task := bus.Task{RunID: "r1", Task: 0, Attempt: 2, Segment: []bus.SegmentItem{{Task: 1, Attempt: 1}, {Task: 2, Attempt: 3}}}
	signTask(a, &task)
	require.Equal(t, bus.TaskToken(a.Secret, "r1", 0, 2), task.Token)
	require.Equal(t, bus.TaskToken(a.Secret, "r1", 1, 1), task.Segment[0].Token)
	require.Equal(t, bus.TaskToken(a.Secret, "r1", 2, 3), task.Segment[1].Token)
	legacy := bus.Task{RunID: "r9"}
	signTask(&record{RunID: "r9"}, &legacy)
	require.Empty(t, legacy.Token)
}

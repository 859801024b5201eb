package coordinator

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/bus"
)

// Why a history fact is refused.
var (
	// errUnsigned: the fact has no MAC (a worker of an earlier version,
	// or anyone publishing on the run's outcome subject).
	errUnsigned = errors.New("unsigned: no mac (a worker of an earlier version, or a forgery)")
	// errForged: the MAC is not the one of the task's token nor of the
	// run's secret.
	errForged = errors.New("invalid mac: not signed by the worker the task was delivered to nor by a coordinator")
)

// verifyFact checks that a fact of rec's history was written by someone
// trusted with it: a worker outcome must be signed with the token of its
// task attempt (which only the worker the task message was delivered to
// holds), a coordinator's fact (deadline, cancellation, a child run's
// outcome) with the run's secret. A run without a secret was started by
// a coordinator of an earlier version: its facts are applied unverified.
func verifyFact(rec *record, o bus.Outcome) error {
	if len(rec.Secret) == 0 {
		return nil
	}
	if o.MAC == "" {
		return errUnsigned
	}
	// A task outcome is almost always a worker's: its token is tried
	// first (two MACs per outcome, not three).
	if o.Kind == bus.FactOutcome && bus.VerifyOutcome(o, bus.TaskToken(rec.Secret, o.RunID, o.Task, o.Attempt)) {
		return nil
	}
	if bus.VerifyFact(o, rec.Secret) {
		return nil
	}
	return errForged
}

// refuse drops a fact verifyFact refused: logged, counted and noted on
// the run's span; never applied.
func (r *run) refuse(e bus.HistoryEntry, err error) {
	o := e.Outcome
	reason := "forged"
	if errors.Is(err, errUnsigned) {
		reason = "unsigned"
	}
	r.log.Warn("history entry refused: "+err.Error(), "seq", e.Seq, "kind", string(o.Kind), "task", o.Task,
		"attempt", o.Attempt, "status", string(o.Status), "worker", o.Worker)
	r.c.metrics.refused.Add(context.Background(), 1, metric.WithAttributes(attribute.String("reason", reason)))
	if r.span != nil {
		r.span.AddEvent("history fact refused", trace.WithAttributes(attribute.String("manifold.reason", reason),
			attribute.Int64("manifold.seq", int64(e.Seq)), attribute.Int("manifold.task", o.Task),
			attribute.Int("manifold.attempt", o.Attempt), attribute.String("manifold.worker", o.Worker),
			attribute.String("manifold.kind", string(o.Kind))))
	}
}

// signTask gives a task message, and each item of its segment, the
// token of its task attempt.
func signTask(rec *record, t *bus.Task) {
	if len(rec.Secret) == 0 {
		return
	}
	t.Token = bus.TaskToken(rec.Secret, rec.RunID, t.Task, t.Attempt)
	for i := range t.Segment {
		t.Segment[i].Token = bus.TaskToken(rec.Secret, rec.RunID, t.Segment[i].Task, t.Segment[i].Attempt)
	}
}

// newSecret gives a new run its secret: a child run's derives from its
// parent's (bus.ChildSecret), a root run's is random.
func newSecret(rec *record, parent *childOf) error {
	if parent != nil {
		rec.Secret = bus.ChildSecret(parent.parent.Secret, rec.RunID)
		return nil
	}
	s, err := bus.NewRunSecret()
	if err != nil {
		return fmt.Errorf("run %s: %w", rec.RunID, err)
	}
	rec.Secret = s
	return nil
}

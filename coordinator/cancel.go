package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/manifold-run/manifold/bus"
)

// cancelWait bounds how long a cancellation waits for the run to end.
const cancelWait = 5 * time.Second

// ErrRunEnded: a run cannot be cancelled because it has already ended.
var ErrRunEnded = errors.New("coordinator: run has already ended")

// cancelRun cancels a run: it appends a cancellation to the run's history,
// where the coordinator driving the run reads it like any other fact
// (cancelling the unfinished tasks and, through their histories, the
// child runs), and announces it on bus.CancelSubject (core NATS) so
// workers kill the run's running tasks at once. It then waits, within
// ctx, for the run to end, and returns its final status: RunCancelled, or
// ErrRunEnded with the status the run reached first (it had already
// ended, or its last outcome was in the history before the
// cancellation). When no coordinator ends the run within ctx (none is
// running), the cancellation stays recorded, the next coordinator to take
// the run carries it out, and RunCancelled is returned. An unknown run
// gives an error wrapping bus.ErrNotFound.
func (c *Coordinator) cancelRun(ctx context.Context, runID string) (RunStatus, error) {
	rec, _, err := loadRecord(ctx, c.bus.Runs(), runID)
	if err != nil {
		return "", fmt.Errorf("cancel run %s: %w", runID, err)
	}
	switch {
	case rec.Status == RunCancelled:
		return RunCancelled, nil
	case rec.Status.Final():
		return rec.Status, fmt.Errorf("cancel run %s: %w (%s)", runID, ErrRunEnded, rec.Status)
	}
	fact := bus.Outcome{RunID: runID, Kind: bus.FactCancel}
	bus.SignFact(&fact, rec.Secret)
	if err := c.bus.PublishFact(ctx, fact, runID+"/cancel"); err != nil {
		return "", fmt.Errorf("cancel run %s: %w", runID, err)
	}
	if err := c.bus.Conn().Publish(bus.CancelSubject(runID), nil); err != nil {
		c.log.Warn("cancel announcement not published", "run_id", runID, "error", err)
	}
	c.log.Info("run cancellation recorded", "run_id", runID)
	wctx, cancel := context.WithTimeout(ctx, cancelWait)
	defer cancel()
	status, err := c.bus.Runs().WaitFor(wctx, runKey(runID), func(value []byte) bool {
		var r record
		return decodeRecord(value, &r) == nil && r.Status.Final()
	})
	if err != nil {
		if wctx.Err() != nil {
			return RunCancelled, nil
		}
		return "", fmt.Errorf("cancel run %s: %w", runID, err)
	}
	var final record
	if err := decodeRecord(status, &final); err != nil {
		return "", err
	}
	if final.Status != RunCancelled {
		return final.Status, fmt.Errorf("cancel run %s: %w (%s)", runID, ErrRunEnded, final.Status)
	}
	return RunCancelled, nil
}

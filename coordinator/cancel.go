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
// child runs), and announces it to workers (announceCancel): they drop
// the run's queued tasks and kill its running ones. It then waits, within
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
	c.announceCancel(ctx, runID)
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

// announceCancel tells workers that runID was cancelled, once the
// cancellation is in the run's history: durably, in bus.BucketCancels
// (a worker reads it before executing any task, so tasks of the run still
// queued are dropped, also by workers that were not connected), and at
// once on bus.CancelSubject (workers kill the run's running tasks). A
// cancelled root run cancels the tasks of its whole tree this way
// (workers look up a task's root run too); a child run cancelled alone is
// marked by its parent's coordinator, and its own children in turn.
func (c *Coordinator) announceCancel(ctx context.Context, runID string) {
	if err := c.bus.MarkCancelled(context.WithoutCancel(ctx), runID); err != nil {
		c.log.Warn("cancellation not recorded for workers; its queued tasks run and their outcomes are ignored", "run_id", runID, "error", err)
	}
	if err := c.bus.Conn().Publish(bus.CancelSubject(runID), nil); err != nil {
		c.log.Warn("cancel announcement not published", "run_id", runID, "error", err)
	}
}

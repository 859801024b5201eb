package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/manifold-run/manifold/bus"
)

// ErrRunEnded: a run cannot be cancelled because it has already ended.
var ErrRunEnded = errors.New("coordinator: run has already ended")

// maxCancelAttempts bounds the compare-and-swap retries of a cancellation
// racing the run's own record writes.
const maxCancelAttempts = 20

// cancelRun cancels a run and, first, its unfinished child runs. It writes
// the run record with status cancelled, every unfinished task cancelled,
// by compare and swap: the coordinator driving the run loses its next
// write and leaves the run, so nothing more is dispatched. Then it
// publishes the task and run events followers wait for, and announces the
// cancellation on bus.CancelSubject (core NATS): workers listening there
// cancel the run's running tasks. An outcome that still arrives is dropped.
//
// It returns RunCancelled, or ErrRunEnded with the final status the run
// already had (cancelling a cancelled run is not an error), or an error
// wrapping bus.ErrNotFound.
func (c *Coordinator) cancelRun(ctx context.Context, runID string) (RunStatus, error) {
	return c.cancelTree(ctx, runID, 0)
}

func (c *Coordinator) cancelTree(ctx context.Context, runID string, level int) (RunStatus, error) {
	for attempt := 0; ; attempt++ {
		rec, rev, err := loadRecord(ctx, c.bus.Runs(), runID)
		if err != nil {
			return "", fmt.Errorf("cancel run %s: %w", runID, err)
		}
		switch {
		case rec.Status == RunCancelled:
			return RunCancelled, nil
		case rec.Status.Final():
			return rec.Status, fmt.Errorf("cancel run %s: %w (%s)", runID, ErrRunEnded, rec.Status)
		}
		if level < maxReportDepth {
			for _, t := range rec.Tasks {
				if t.Child != "" && !t.Status.Final() {
					if _, err := c.cancelTree(ctx, t.Child, level+1); err != nil && !errors.Is(err, ErrRunEnded) {
						return "", err
					}
				}
			}
		}
		now := time.Now().UTC()
		var cancelled []int
		for i, t := range rec.Tasks {
			if t.Status.Final() {
				continue
			}
			if t.Status == bus.TaskPending {
				t.Message = "cancelled before it was dispatched"
			} else {
				t.Message = "cancelled while " + string(t.Status) + "; workers are told to stop it, its outcome is ignored"
			}
			t.Status, t.Changed = bus.TaskCancelled, false
			cancelled = append(cancelled, i)
		}
		rec.Status, rec.Error, rec.FinishedAt = RunCancelled, "cancelled", now
		if rec.StartedAt.IsZero() {
			rec.StartedAt = now
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return "", err
		}
		if _, err := c.bus.Runs().Update(ctx, runKey(runID), data, rev); err != nil {
			if errors.Is(err, bus.ErrRevisionMismatch) && attempt < maxCancelAttempts {
				continue // the run moved on meanwhile: look again
			}
			return "", fmt.Errorf("cancel run %s: %w", runID, err)
		}
		total := len(rec.Tasks)
		done := total
		for _, i := range cancelled {
			t := rec.Tasks[i]
			c.event(ctx, rec, bus.Event{Kind: bus.EventTaskFinished, Task: &i, Ref: t.Ref, Status: string(bus.TaskCancelled),
				Outcome: bus.TaskCancelled, Message: t.Message, Done: done, Total: total})
		}
		rep := rec.report()
		c.event(ctx, rec, bus.Event{Kind: bus.EventRunFinished, Status: string(RunCancelled), Error: rec.Error,
			Done: total, Total: total, DurationMS: rep.DurationMS})
		if err := c.bus.Runs().Delete(ctx, activeKey(runID)); err != nil {
			c.log.Debug("active marker not removed; the next recovery scan removes it", "run_id", runID, "error", err)
		}
		if err := c.bus.Conn().Publish(bus.CancelSubject(runID), nil); err != nil {
			c.log.Warn("cancel announcement not published", "run_id", runID, "error", err)
		}
		c.metrics.runEnded(RunCancelled)
		c.log.Info("run cancelled", "run_id", runID, "tasks_cancelled", len(cancelled))
		return RunCancelled, nil
	}
}

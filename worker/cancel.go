package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/manifold-run/manifold/bus"
)

// dropCancelled reports whether task belongs to a cancelled run (or run
// tree) and, if so, settles its message without executing it: acked, with
// no outcome. The run's history already holds the cancellation (it is
// written before workers are told), so its coordinator settles the task
// as cancelled; an outcome would be ignored anyway.
//
// The check is the worker's memory of cancellations announced on the
// control subject, then the cancels bucket (a direct get per run ID), for
// cancellations announced while the worker was not connected. A bucket
// that cannot be read gives the task back for a later delivery rather
// than running it unchecked.
func (w *Worker) dropCancelled(ctx context.Context, d *bus.Delivery, task bus.Task, log *slog.Logger) bool {
	cancelled := w.runCancelled(task)
	if !cancelled {
		var err error
		if cancelled, err = w.bus.Cancelled(ctx, task.RunID, task.RootRunID); err != nil {
			log.Warn("cancellations not readable; the task is delivered again", "task", task.Task, "error", err)
			_ = d.Nak(time.Second)
			return true
		}
	}
	if !cancelled {
		return false
	}
	log.Info("task dropped: its run was cancelled", "task", task.Task, "resources", 1+len(task.Segment))
	if err := d.Ack(context.WithoutCancel(ctx)); err != nil {
		log.Warn("ack of a dropped task failed; its redelivery is dropped too", "error", err)
	}
	return true
}

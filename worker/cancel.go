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
// cancellations announced while the worker was not connected. A run the
// bucket said was not cancelled is not looked up again while the
// connection that heard the control subject since has not been
// re-established (notCancelled): a cancellation written to the bucket
// after the look-up is announced after it, on that subscription. A bucket
// that cannot be read gives the task back for a later delivery rather
// than running it unchecked.
func (w *Worker) dropCancelled(ctx context.Context, d *bus.Delivery, task bus.Task, log *slog.Logger) bool {
	cancelled := w.runCancelled(task)
	if !cancelled {
		var err error
		if cancelled, err = w.lookUpCancelled(ctx, task.RunID, task.RootRunID); err != nil {
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

// maxNotCancelled bounds the runs a worker remembers as looked up and not
// cancelled; past it the memory is emptied (each run is then looked up
// once more).
const maxNotCancelled = 4096

// lookUpCancelled reports whether any of runIDs is marked in the cancels
// bucket, looking up only those not known (notCancelled) to be
// uncancelled since the connection's last reconnection.
func (w *Worker) lookUpCancelled(ctx context.Context, runIDs ...string) (bool, error) {
	conn := w.bus.Conn().Stats().Reconnects
	for i, id := range runIDs {
		if id == "" || (i > 0 && id == runIDs[0]) {
			continue
		}
		w.runMu.Lock()
		at, known := w.notCancelled[id]
		w.runMu.Unlock()
		if known && at == conn {
			continue
		}
		cancelled, err := w.bus.Cancelled(ctx, id)
		if err != nil || cancelled {
			return cancelled, err
		}
		w.runMu.Lock()
		if w.notCancelled == nil || len(w.notCancelled) >= maxNotCancelled {
			w.notCancelled = map[string]uint64{}
		}
		w.notCancelled[id] = conn
		w.runMu.Unlock()
	}
	return false, nil
}

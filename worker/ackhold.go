package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// ackHold is how long the ack of a finished task is held back when no
// other task arrives meanwhile (see heldAcks).
const ackHold = 2 * time.Millisecond

// maxHeldAcks bounds the acks held at once; the one past it sends them
// all.
const maxHeldAcks = 256

// acknowledger is what heldAcks settles: a task's delivery.
type acknowledger interface {
	AckNoWait(ctx context.Context) error
}

// heldAcks holds the acks of finished tasks (their outcomes already
// durable) until the worker's next task arrives, or ackHold passes, or
// maxHeldAcks are held. A work-queue stream removes a message when it is
// acked; the server empties its last file block with the stream's last
// message and makes a new block file (a file created, another removed,
// every time): in a chain of tasks, one per task, a quarter of the
// server's CPU. Sent once the next task is there (stored before its
// predecessor is removed), the ack leaves the block as it is. A worker
// killed while it holds acks loses them: the tasks are redelivered after
// the consumer's AckWait and answered from their records (a resource that
// changed or failed) or checked again, as for any lost ack.
type heldAcks struct {
	log *slog.Logger
	// hold overrides ackHold (tests).
	hold time.Duration

	mu    sync.Mutex
	held  []acknowledger
	timer *time.Timer
}

// add holds d's ack.
func (h *heldAcks) add(d acknowledger) {
	h.mu.Lock()
	h.held = append(h.held, d)
	if len(h.held) >= maxHeldAcks {
		h.sendLocked()
		h.mu.Unlock()
		return
	}
	if h.timer == nil {
		h.timer = time.AfterFunc(h.holdFor(), h.send)
	} else if len(h.held) == 1 {
		h.timer.Reset(h.holdFor())
	}
	h.mu.Unlock()
}

func (h *heldAcks) holdFor() time.Duration {
	if h.hold > 0 {
		return h.hold
	}
	return ackHold
}

// send sends every held ack now.
func (h *heldAcks) send() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sendLocked()
}

func (h *heldAcks) sendLocked() {
	if len(h.held) == 0 {
		return
	}
	if h.timer != nil {
		h.timer.Stop()
	}
	for i, d := range h.held {
		// Not waited for: the outcomes are durable, and a lost ack is a
		// redelivery answered from the record (bus.Delivery.AckNoWait).
		if err := d.AckNoWait(context.Background()); err != nil {
			h.log.Warn("task ack failed; the redelivery is answered from the record", "error", err)
		}
		h.held[i] = nil
	}
	h.held = h.held[:0]
}

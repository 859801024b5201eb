package worker

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countingAck counts its acks and tells acked of each.
type countingAck struct {
	n     *atomic.Int32
	acked chan struct{}
}

func (c countingAck) AckNoWait(context.Context) error {
	c.n.Add(1)
	c.acked <- struct{}{}
	return nil
}

// TestHeldAcksWaitForTheNextTaskOrTheHold: a finished task's ack is held
// until send (the worker's next task arrived), until the hold passes with
// no next task, or until maxHeldAcks are held; each is sent once.
func TestHeldAcksWaitForTheNextTaskOrTheHold(t *testing.T) {
	var n atomic.Int32
	acked := make(chan struct{}, 2*maxHeldAcks)
	d := countingAck{n: &n, acked: acked}
	h := &heldAcks{log: slog.New(slog.NewTextHandler(io.Discard, nil)), hold: time.Hour}

	h.add(d)
	h.add(d)
	require.Zero(t, n.Load(), "held until the next task or the hold")
	h.send()
	require.EqualValues(t, 2, n.Load())
	h.send()
	require.EqualValues(t, 2, n.Load(), "each ack is sent once")

	for range maxHeldAcks - 1 {
		h.add(d)
	}
	require.EqualValues(t, 2, n.Load())
	h.add(d) // the maxHeldAcks-th
	require.EqualValues(t, 2+maxHeldAcks, n.Load(), "a full hold is sent at once")

	// With no next task, the hold's timer sends it.
	for range len(acked) {
		<-acked
	}
	h.mu.Lock()
	h.hold = 10 * time.Millisecond
	h.mu.Unlock()
	h.add(d)
	select {
	case <-acked:
	case <-time.After(10 * time.Second):
		t.Fatal("the held ack was not sent after the hold")
	}
	require.EqualValues(t, 3+maxHeldAcks, n.Load())
}

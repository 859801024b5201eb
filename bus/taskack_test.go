package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// TestAckNoWaitSettlesTheTask: a task acknowledged with AckNoWait is
// settled: the next pull gets the next task, and the first is not
// redelivered after AckWait (five of them are waited for).
func TestAckNoWaitSettlesTheTask(t *testing.T) {
	const ackWait = 200 * time.Millisecond
	_, b := bustest.Start(t, bus.Config{TaskAckWait: ackWait})
	ctx := ctxT(t)
	for i := range 2 {
		require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: "r", Task: i, Attempt: 1, Pool: "p"}))
	}
	c, err := b.TaskConsumer(ctx, "p")
	require.NoError(t, err)
	for i := range 2 {
		d, err := c.Next(ctx)
		require.NoError(t, err)
		var task bus.Task
		require.NoError(t, bus.Decode(d.Data(), &task))
		require.Equal(t, i, task.Task)
		require.Equal(t, 1, d.Attempt)
		require.NoError(t, d.AckNoWait(ctx))
	}
	short, cancel := context.WithTimeout(ctx, 5*ackWait)
	defer cancel()
	_, err = c.Next(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "an acknowledged task was redelivered")
}

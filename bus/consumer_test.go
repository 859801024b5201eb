package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// TestRefusedPullsBackOff: a worker whose pulls the server refuses (more
// waiting pulls than the consumer takes: 409 Exceeded MaxWaiting, as with
// hundreds of idle workers on one pool) waits before it pulls again,
// instead of spinning on both sides.
func TestRefusedPullsBackOff(t *testing.T) {
	srv, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	c1, err := b.TaskConsumer(ctx, "busy")
	require.NoError(t, err)
	_, most, err := c1.Waiting(ctx)
	require.NoError(t, err)
	// Idle workers fill every waiting pull the pool's consumer takes.
	idle, cancelIdle := context.WithCancel(ctx)
	defer cancelIdle()
	for range most {
		go func() { _, _ = c1.Next(idle) }()
	}
	require.Eventually(t, func() bool {
		waiting, most, err := c1.Waiting(ctx)
		return err == nil && waiting >= most
	}, 10*time.Second, 10*time.Millisecond)

	second := bustest.Open(t, srv, bus.Config{})
	c2, err := second.TaskConsumer(ctx, "busy")
	require.NoError(t, err)
	before := second.Conn().Stats().OutMsgs
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = c2.Next(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// Pulls (and their unsubscriptions) in that second: a handful with
	// the back-off, thousands without.
	sent := second.Conn().Stats().OutMsgs - before
	require.Less(t, sent, uint64(60), "pulls refused by the server must back off")
}

package bus_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// TestRefusedPullsBackOff: a worker whose pulls the server refuses (more
// waiting pulls than the consumer takes: 409 Exceeded MaxWaiting, as with
// hundreds of idle workers on one pool) waits before it pulls again,
// instead of spinning on both sides.
func TestRefusedPullsBackOff(t *testing.T) {
	// A pool consumer created with a small MaxWaiting (the default,
	// PoolMaxWaiting, is sized for a fleet: see TestPoolMaxWaiting).
	srv, b := bustest.Start(t, bus.Config{PoolMaxWaiting: 8})
	ctx := ctxT(t)
	c1, err := b.TaskConsumer(ctx, "busy")
	require.NoError(t, err)
	_, most, err := c1.Waiting(ctx)
	require.NoError(t, err)
	require.Equal(t, 8, most)
	// Idle workers fill every waiting pull the pool's consumer takes:
	// one Consumer each (a Consumer has one pull out at a time).
	idle, cancelIdle := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancelIdle()
	for range most {
		c, err := b.TaskConsumer(ctx, "busy")
		require.NoError(t, err)
		wg.Go(func() { _, _ = c.Next(idle) })
	}
	require.Eventually(t, func() bool {
		waiting, most, err := c1.Waiting(ctx)
		return err == nil && waiting >= most
	}, 10*time.Second, 10*time.Millisecond)

	second := bustest.Open(t, srv, bus.Config{PoolMaxWaiting: 8})
	c2, err := second.TaskConsumer(ctx, "busy")
	require.NoError(t, err)
	before := second.Conn().Stats().OutMsgs
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = c2.Next(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// Pulls in that second: a handful with the back-off, thousands
	// without.
	sent := second.Conn().Stats().OutMsgs - before
	require.Less(t, sent, uint64(60), "pulls refused by the server must back off")
}

// TestPoolMaxWaiting: a pool's consumer takes a fleet's idle workers'
// pulls (NATS's default is 512), each Consumer pulls on one persistent
// inbox subscription (not one per fetch), and a consumer created with
// another MaxWaiting is bound as it is.
func TestPoolMaxWaiting(t *testing.T) {
	srv, b := bustest.Start(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := b.TaskConsumer(ctx, "fleet")
	require.NoError(t, err)
	_, most, err := c.Waiting(ctx)
	require.NoError(t, err)
	require.Equal(t, 65536, most)

	// 520 idle pullers, more than NATS's default: all wait, none refused.
	const idlers = 520
	idle, cancelIdle := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancelIdle()
	for range idlers {
		c, err := b.TaskConsumer(ctx, "fleet")
		require.NoError(t, err)
		wg.Go(func() { _, _ = c.Next(idle) })
	}
	require.Eventually(t, func() bool {
		waiting, _, err := c.Waiting(ctx)
		return err == nil && waiting == idlers
	}, 20*time.Second, 20*time.Millisecond)

	// One subscription per Consumer, kept across its pulls: tasks taken
	// one after another by one Consumer add no subscription.
	other := bustest.Open(t, srv, bus.Config{})
	taker, err := other.TaskConsumer(ctx, "solo")
	require.NoError(t, err)
	subsBefore := other.Conn().NumSubscriptions()
	for i := range 5 {
		require.NoError(t, other.PublishTask(ctx, bus.Task{RunID: "r", Task: i, Pool: "solo", Manifest: "m.yaml"}))
		d, err := taker.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, d.Attempt)
		require.NoError(t, d.Ack(ctx))
		require.Equal(t, subsBefore+1, other.Conn().NumSubscriptions(), "task %d", i)
	}
	// Its context ended, a Consumer drops its subscription.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	_, err = taker.Next(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, subsBefore, other.Conn().NumSubscriptions())

	// A consumer made with another MaxWaiting (an earlier version's 512)
	// is bound, not refused.
	small := bustest.Open(t, srv, bus.Config{PoolMaxWaiting: 512})
	old, err := small.TaskConsumer(ctx, "older")
	require.NoError(t, err)
	_, most, err = old.Waiting(ctx)
	require.NoError(t, err)
	require.Equal(t, 512, most)
	again, err := b.TaskConsumer(ctx, "older")
	require.NoError(t, err)
	_, most, err = again.Waiting(ctx)
	require.NoError(t, err)
	require.Equal(t, 512, most)
}

// TestTaskConsumerBindsWithoutCreate: a worker binds a pool's task
// consumer with one names request (which walks the stream's consumers,
// not the consumer's waiting pulls) and pulls: the first worker finds no
// consumer and creates it, every later worker pulls with neither a create
// nor an info request (whose answer walks every waiting pull: N starts x
// N pulls at 10,000 workers). Each worker gets a task; a consumer deleted
// under waiting workers (409 consumer deleted) is created again by them
// and they go on taking tasks.
func TestTaskConsumerBindsWithoutCreate(t *testing.T) {
	t.Parallel()
	srv, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	spy := spyAPI(t, srv)
	t0 := time.Now()
	apiRequests := func() (creates, other []string) {
		for _, s := range spy.subjects(t) {
			switch {
			case strings.HasPrefix(s, "$JS.API.CONSUMER.MSG.NEXT."), s == "$JS.API.CONSUMER.NAMES.MANIFOLD_TASKS":
			case strings.HasPrefix(s, "$JS.API.CONSUMER.CREATE."):
				creates = append(creates, s)
			default:
				other = append(other, s)
			}
		}
		return creates, other
	}
	take := func(c *bus.Consumer, got chan<- string) {
		d, err := c.Next(ctx)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		if err := d.Ack(ctx); err != nil {
			got <- "ack error: " + err.Error()
			return
		}
		got <- d.Subject()
	}
	publish := func(run string, n int) {
		for i := range n {
			require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: run, Task: i, Attempt: 1, Pool: "fleet"}))
		}
	}

	// The first worker: its pull finds no consumer and creates it.
	got := make(chan string, 64)
	first, err := b.TaskConsumer(ctx, "fleet")
	require.NoError(t, err)
	go take(first, got)
	publish("r0", 1)
	require.Contains(t, <-got, "fleet")
	require.Less(t, time.Since(t0), 3*time.Second, "the first worker binds at once")
	creates, other := apiRequests()
	require.Len(t, creates, 1, "the first worker creates the pool's consumer once")
	require.Empty(t, other)

	// 20 more workers bind and wait: pulls only.
	const workers = 20
	cs := make([]*bus.Consumer, workers)
	for i := range cs {
		cs[i], err = b.TaskConsumer(ctx, "fleet")
		require.NoError(t, err)
		go take(cs[i], got)
	}
	publish("r1", workers)
	for range workers {
		require.Contains(t, <-got, "fleet")
	}
	creates, other = apiRequests()
	require.Empty(t, creates, "workers binding an existing pool consumer must not create it")
	require.Empty(t, other, "workers binding an existing pool consumer must send no other API request")

	// The consumer deleted under waiting workers: created again, tasks
	// taken.
	for i := range cs {
		go take(cs[i], got)
	}
	js, err := jetstream.New(b.Conn())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c, err := js.Consumer(ctx, "MANIFOLD_TASKS", "tasks-fleet")
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumWaiting == workers
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, js.DeleteConsumer(ctx, "MANIFOLD_TASKS", "tasks-fleet"))
	t1 := time.Now()
	publish("r2", workers)
	for range workers {
		require.Contains(t, <-got, "fleet")
	}
	require.Less(t, time.Since(t1), 10*time.Second, "workers whose consumer was deleted create it again at once")
}

// TestIdlePullIsLongAndHeardOf: an idle worker keeps one pull waiting on
// its pool's consumer for 15 minutes, with an idle heartbeat every 5
// (every pull that arrives, expires or is due a heartbeat makes the
// server walk every waiting pull: N idle workers cost N x (2/15 min + 1/5
// min) walks of N pulls, 4.2 times fewer than 5-minute pulls with a
// heartbeat a minute). The server takes such a pull (a heartbeat above
// half the expiry it refuses), it waits, and a task published then is
// delivered on it.
func TestIdlePullIsLongAndHeardOf(t *testing.T) {
	t.Parallel()
	srv, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	spy, err := srv.Connect("pull-spy")
	require.NoError(t, err)
	t.Cleanup(spy.Close)
	pulls, err := spy.SubscribeSync("$JS.API.CONSUMER.MSG.NEXT.MANIFOLD_TASKS.tasks-idle")
	require.NoError(t, err)
	require.NoError(t, spy.Flush())

	c, err := b.TaskConsumer(ctx, "idle")
	require.NoError(t, err)
	got := make(chan *bus.Delivery, 1)
	errs := make(chan error, 1)
	go func() {
		d, err := c.Next(ctx)
		if err != nil {
			errs <- err
			return
		}
		got <- d
	}()
	m, err := pulls.NextMsg(10 * time.Second)
	require.NoError(t, err)
	var req struct {
		Batch     int           `json:"batch"`
		Expires   time.Duration `json:"expires"`
		Heartbeat time.Duration `json:"idle_heartbeat"`
	}
	require.NoError(t, json.Unmarshal(m.Data, &req))
	require.Equal(t, 1, req.Batch)
	require.Equal(t, 15*time.Minute, req.Expires)
	require.Equal(t, 5*time.Minute, req.Heartbeat)

	// Taken by the server: it waits on the consumer (a refused pull is
	// answered and sent again, which the spy would see).
	probe, err := b.TaskConsumer(ctx, "idle")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		waiting, _, err := probe.Waiting(ctx)
		return err == nil && waiting == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: "r-idle", Task: 0, Attempt: 1, Pool: "idle"}))
	select {
	case d := <-got:
		require.Contains(t, d.Subject(), "idle")
		require.NoError(t, d.Ack(ctx))
	case err := <-errs:
		t.Fatalf("next: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the task was not delivered on the waiting pull")
	}
	_, err = pulls.NextMsg(0)
	require.Error(t, err, "one pull: the server took it and delivered the task on it")
}

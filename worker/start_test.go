package worker_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// TestStartRoundTrips: a worker's start (attach, then Start) through a
// link with 50 ms of latency each way takes a few round trips, not one per
// request: the attach lookups are sent at once, and so are the pool
// consumers, the pinned stream's lookup and the registration. Before,
// they were sent one after another: 10 round trips (about 4 s here),
// which a fleet of 10,000 hosts starting against a busy server paid in
// full.
func TestStartRoundTrips(t *testing.T) {
	t.Parallel()
	// The link's latency is large next to the server's own work on the
	// requests, so the bounds below count round trips, not load: at 50 ms
	// each way a loaded machine (load 16, -race) once took 3.0 round trips
	// to start, the server's processing of the requests standing in for a
	// round trip it did not make.
	const oneWay = 200 * time.Millisecond
	srv, _ := bustest.Start(t, bus.Config{})
	addr := strings.TrimPrefix(srv.ClientURL(), "nats://")
	link := newSlowLink(t, addr, oneWay)
	nc, err := nats.Connect("nats://"+link, nats.CustomInboxPrefix(bus.WorkerInboxPrefix))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	// One request's round trip through the link, at best of three (the
	// machine's load adds to it).
	rtt := time.Hour
	for range 3 {
		t0 := time.Now()
		_, err := nc.Request("$JS.API.INFO", nil, 5*time.Second)
		require.NoError(t, err)
		rtt = min(rtt, time.Since(t0))
	}
	require.GreaterOrEqual(t, rtt, 2*oneWay)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	b, err := bus.Attach(ctx, nc, bus.Config{})
	require.NoError(t, err)
	attached := time.Since(t0)
	w, err := worker.New(worker.Config{Bus: b, Registry: builtin.Registry(), Name: "slow", Pools: []string{"web"},
		Logger: testLogger(t), DisableAssignments: true})
	require.NoError(t, err)
	t1 := time.Now()
	require.NoError(t, w.Start(ctx))
	started := time.Since(t1)
	t.Cleanup(func() { within(t, "Kill", w.Kill) })
	t.Logf("round trip %v; attach %v (%.1f round trips), start %v (%.1f)", rtt, attached,
		float64(attached)/float64(rtt), started, float64(started)/float64(rtt))
	require.Less(t, attached, 4*rtt, "attach: lookups one after another (7 round trips before)")
	require.Less(t, started, 5*rtt/2, "start: requests one after another (3 round trips before)")
}

// newSlowLink serves a TCP proxy to addr on loopback that delays every
// chunk by oneWay in each direction (order kept), and returns its address.
func newSlowLink(t *testing.T, addr string, oneWay time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Go(func() { delayCopy(up, c, oneWay) })
			wg.Go(func() { delayCopy(c, up, oneWay) })
		}
	})
	return l.Addr().String()
}

// delayCopy copies src to dst, each chunk oneWay after it was read.
func delayCopy(dst, src net.Conn, oneWay time.Duration) {
	type chunk struct {
		at   time.Time
		data []byte
	}
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		buf := make([]byte, 64<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{time.Now().Add(oneWay), append([]byte(nil), buf[:n]...)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.at)) // the simulated latency, not a wait for an event
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	for range q {
	}
	_ = dst.Close()
	_, _ = io.Copy(io.Discard, src)
}

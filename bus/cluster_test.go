package bus_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestClusterSurvivesANodeLoss provisions R3 streams and buckets on a real
// three-server cluster, stops one server and keeps working.
func TestClusterSurvivesANodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	ports := []int{freePort(t), freePort(t), freePort(t)}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	var servers []*bus.Server
	var urls []string
	for i, p := range ports {
		srv, err := bus.StartServer(bus.ServerConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0",
			ServerName: fmt.Sprintf("n%d", i+1), ClusterListen: fmt.Sprintf("127.0.0.1:%d", p), Routes: routes,
			ReadyTimeout: 20 * time.Second})
		require.NoError(t, err)
		t.Cleanup(srv.Shutdown)
		servers = append(servers, srv)
		urls = append(urls, srv.ClientURL())
	}
	nc, err := bus.Connect(bus.ConnectConfig{URL: urls[0] + "," + urls[1] + "," + urls[2], Name: "cluster-test"})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	// Elections on two loaded cores under -race take seconds each: the
	// whole test gets two minutes, each step below its own bound.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Open retries while the meta leader is elected.
	b, err := bus.Open(ctx, nc, bus.Config{Replicas: 3})
	require.NoError(t, err)

	_, err = b.Runs().Put(ctx, "k", []byte("before"))
	require.NoError(t, err)
	require.NoError(t, b.PublishTask(ctx, bus.Task{RunID: "r", Task: 0, Attempt: 1, Pool: "p"}))

	// Lose the node the client is connected to.
	connected := nc.ConnectedUrl()
	for i, u := range urls {
		if u == connected || nats.DefaultURL == connected {
			servers[i].Shutdown()
		}
	}
	require.Eventually(t, func() bool { return nc.IsConnected() && nc.ConnectedUrl() != connected }, 20*time.Second, 20*time.Millisecond)

	// Writes and reads go on (retrying while stream leaders move).
	require.Eventually(t, func() bool {
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
		defer wcancel()
		_, err := b.Runs().Put(wctx, "k", []byte("after"))
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)
	// So does binding a consumer: the tasks stream's leader may have been
	// the lost node.
	var c *bus.Consumer
	require.Eventually(t, func() bool {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		c, err = b.TaskConsumer(cctx, "p")
		return err == nil
	}, 60*time.Second, 50*time.Millisecond, "no task consumer bound after the node loss")
	d, err := c.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, d.Ack(ctx))
	e, err := b.Runs().Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "after", string(e.Value))
}

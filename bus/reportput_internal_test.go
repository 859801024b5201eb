package bus

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// startReportBus starts an embedded server and opens a bus on it; it
// returns the server too, whose subscription trie the tests read.
func startReportBus(t *testing.T) (*Server, *Bus) {
	t.Helper()
	srv, err := StartServer(ServerConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	return srv, openReportBus(t, srv)
}

func openReportBus(t *testing.T, srv *Server) *Bus {
	t.Helper()
	nc, err := srv.Connect(t.Name())
	require.NoError(t, err)
	return openBusOn(t, nc)
}

// openBusOn opens a bus on nc, closed with the test.
func openBusOn(t *testing.T, nc *nats.Conn) *Bus {
	t.Helper()
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := Open(ctx, nc, Config{})
	require.NoError(t, err)
	return b
}

// subInserts is how many subscriptions the server's trie has taken so
// far (each wildcard one walks its whole subject cache).
func subInserts(t *testing.T, srv *Server) uint64 {
	t.Helper()
	sz, err := srv.ns.Subsz(&server.SubszOptions{})
	require.NoError(t, err)
	return sz.NumInserts
}

// countRequests counts the requests sent on subject (a filter) from now
// on, as the server delivers them; read it after flush.
func countRequests(t *testing.T, srv *Server, subject string) (n *atomic.Int64, flush func(until string)) {
	t.Helper()
	nc, err := srv.Connect("observer")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	n = &atomic.Int64{}
	// A synchronous subscription whose messages are only counted: every
	// message the server routed to it before the flush's PONG is in its
	// queue once Flush returns (an asynchronous handler might not have run
	// yet, and the count read too low: 1 run in 40 under load).
	sub, err := nc.SubscribeSync(subject)
	require.NoError(t, err)
	require.NoError(t, sub.SetPendingLimits(-1, -1))
	require.NoError(t, nc.Flush())
	// flush counts the requests seen. With until, it first waits (10 s at
	// most) for a request on that subject: the server may answer a
	// JetStream request before it has handed the request to this
	// subscriber (the API's goroutine replies while the publisher's read
	// loop is still delivering), and a flush right after the answer then
	// counted 0 (3 runs in 300 under load). The publisher's requests
	// reach this subscriber in the order sent, so those before it are
	// counted too.
	return n, func(until string) {
		seen := int64(0)
		if until != "" {
			for {
				m, err := sub.NextMsg(10 * time.Second)
				require.NoError(t, err, "no request on %s within 10s", until)
				seen++
				if m.Subject == until {
					break
				}
			}
		}
		require.NoError(t, nc.Flush())
		msgs, _, err := sub.Pending()
		require.NoError(t, err)
		n.Store(seen + int64(msgs))
	}
}

// A report PutReport stores is an object of the reports store in the
// object store's format: nats.go's ObjectStore reads it back whole, with
// its size, chunk count and digest (no chunk for an empty report, five
// for 640 KB), and so does GetReport.
func TestPutReportIsAnObject(t *testing.T) {
	_, b := startReportBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := b.js.ObjectStore(ctx, BucketReports)
	require.NoError(t, err)
	for _, size := range []int{0, 1, reportChunkSize - 1, reportChunkSize, reportChunkSize + 1, 640_000} {
		id := fmt.Sprintf("run-%d", size)
		data := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
		require.NoError(t, b.PutReport(ctx, id, data))
		info, err := store.GetInfo(ctx, id)
		require.NoError(t, err)
		require.Equal(t, uint64(size), info.Size, id)
		require.Equal(t, uint32((size+reportChunkSize-1)/reportChunkSize), info.Chunks, id)
		got, err := store.GetBytes(ctx, id) // nats.go checks the digest
		require.NoError(t, err, id)
		require.Equal(t, data, got, id)
		got, err = b.GetReport(ctx, id)
		require.NoError(t, err, id)
		require.Equal(t, data, got, id)
	}
}

// A report stored again under its run ID (a resumed run ending twice,
// or another process's copy) replaces the first: the newest reads back
// and the first one's chunks are purged.
func TestPutReportReplaces(t *testing.T) {
	srv, b := startReportBus(t)
	other := openReportBus(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := bytes.Repeat([]byte{1}, 300<<10) // three chunks
	require.NoError(t, b.PutReport(ctx, "run-1", first))
	require.NoError(t, other.PutReport(ctx, "run-1", []byte(`{"status":"succeeded"}`)))
	got, err := b.GetReport(ctx, "run-1")
	require.NoError(t, err)
	require.Equal(t, `{"status":"succeeded"}`, string(got))
	s, err := b.js.Stream(ctx, "OBJ_"+BucketReports)
	require.NoError(t, err)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter("$O."+BucketReports+".C.>"))
	require.NoError(t, err)
	require.Len(t, info.State.Subjects, 1, "the first report's chunks are left")

	// Purged by the process that stored it last, and by another.
	require.NoError(t, other.PurgeReport(ctx, "run-1"))
	_, err = b.GetReport(ctx, "run-1")
	require.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, b.PutReport(ctx, "run-2", first))
	require.NoError(t, other.PurgeReport(ctx, "run-2"))
	info, err = s.Info(ctx, jetstream.WithSubjectFilter("$O."+BucketReports+".>"))
	require.NoError(t, err)
	require.Empty(t, info.State.Subjects)
}

// Storing and purging a fan-out's child reports costs the server no
// subscription and no look-up: nats.go's Put subscribed (and
// unsubscribed) a wildcard reply subject of its own per report, each
// walking the server's whole subject cache, and read the name's
// description first; PurgeReport read it again to find the chunks.
func TestReportPutAndPurgeNeedNoSubscriptionOrLookup(t *testing.T) {
	srv, b := startReportBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The bus's own asynchronous publishing subscribes once.
	require.NoError(t, b.PutReport(ctx, "warm", []byte("x")))
	lookups, flush := countRequests(t, srv, "$JS.API.*.GET.>")
	inserts := subInserts(t, srv)
	const children = 20
	for i := range children {
		require.NoError(t, b.PutReport(ctx, fmt.Sprintf("fanout-a%d", i), bytes.Repeat([]byte{byte(i)}, 7000)))
	}
	for i := range children {
		require.NoError(t, b.PurgeReport(ctx, fmt.Sprintf("fanout-a%d", i)))
	}
	flush("")
	require.Equal(t, inserts, subInserts(t, srv), "subscriptions taken by %d puts and purges", children)
	require.Zero(t, lookups.Load(), "look-ups of %d puts and purges", children)
	for i := range children {
		_, err := b.GetReport(ctx, fmt.Sprintf("fanout-a%d", i))
		require.ErrorIs(t, err, ErrNotFound)
	}
}

// A chunk whose acknowledgement never comes (the server went away with
// it: a cluster's leader killed) ends the put with an error after
// reportAckWait, and the clean-up of its chunks after apiRequestWait,
// even under a context without a deadline (a run's finish): the put hung,
// and with it the run and its coordinator's stop
// (TestFailureClusterNodeKilled, 1 run in 4).
func TestPutReportEndsWhenNoAckComes(t *testing.T) {
	old := reportAckWait
	reportAckWait = 300 * time.Millisecond
	t.Cleanup(func() { reportAckWait = old })
	srv, err := StartServer(ServerConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
	require.NoError(t, err)
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	b := openBusOn(t, nc)
	_, err = b.reportStore(t.Context())
	require.NoError(t, err)
	srv.Shutdown()

	done := make(chan error, 1)
	go func() {
		done <- b.PutReport(context.Background(), "run-1", bytes.Repeat([]byte("r"), 3*reportChunkSize))
	}()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "store report of run-1")
	case <-time.After(20 * time.Second):
		t.Fatal("PutReport still waiting 20 s after the server went away")
	}
}

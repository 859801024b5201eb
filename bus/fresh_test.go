package bus_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
)

// apiSpy records the JetStream API requests made on srv while it runs.
type apiSpy struct {
	nc  *nats.Conn
	sub *nats.Subscription
}

func spyAPI(t *testing.T, srv *bus.Server) *apiSpy {
	t.Helper()
	nc, err := srv.Connect("spy")
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync("$JS.API.>")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	return &apiSpy{nc: nc, sub: sub}
}

// subjects returns the subjects of the requests seen so far: the server
// copies a request to the spy before it answers it, and the spy's flush
// returns after every copy queued before it.
func (s *apiSpy) subjects(t *testing.T) []string {
	t.Helper()
	require.NoError(t, s.nc.Flush())
	var out []string
	for {
		m, err := s.sub.NextMsg(0)
		if err != nil {
			return out
		}
		out = append(out, m.Subject)
	}
}

func openOn(t *testing.T, srv *bus.Server, cfg bus.Config) (*bus.Bus, error) {
	t.Helper()
	nc, err := srv.Connect(t.Name())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return bus.Open(ctxT(t), nc, cfg)
}

func startServer(t *testing.T) *bus.Server {
	t.Helper()
	srv, err := bus.StartServer(bus.ServerConfig{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	return srv
}

// TestOpenFreshCreatesEachStreamOnce: on a new server, Fresh provisioning
// creates every stream, bucket and object store with one create request
// (no update that fails first, no delete of an earlier version's stream),
// in fewer requests than the provisioning that cannot assume an empty
// server, and the bus works.
func TestOpenFreshCreatesEachStreamOnce(t *testing.T) {
	t.Parallel()
	count := func(fresh bool) (creates map[string]int, total int) {
		srv := startServer(t)
		spy := spyAPI(t, srv)
		b, err := openOn(t, srv, bus.Config{MemoryStorage: true, Fresh: fresh})
		require.NoError(t, err)
		_, err = b.Runs().Put(ctxT(t), "k", []byte("v"))
		require.NoError(t, err)
		subjects := spy.subjects(t)
		creates = map[string]int{}
		for _, s := range subjects {
			if name, ok := strings.CutPrefix(s, "$JS.API.STREAM.CREATE."); ok {
				creates[name]++
			}
			if fresh {
				require.NotContains(t, s, "STREAM.UPDATE", "fresh provisioning updated a stream")
				require.NotContains(t, s, "STREAM.DELETE", "fresh provisioning deleted a stream")
			}
		}
		js, err := jetstream.New(b.Conn())
		require.NoError(t, err)
		names := js.StreamNames(ctxT(t))
		var streams []string
		for n := range names.Name() {
			streams = append(streams, n)
		}
		require.NoError(t, names.Err())
		require.Len(t, creates, len(streams), "streams created %v, streams on the server %v", creates, streams)
		for _, n := range streams {
			require.Equal(t, 1, creates[n], "stream %s created %d times", n, creates[n])
		}
		return creates, len(subjects) - 1 // less the bucket put
	}
	_, fresh := count(true)
	_, full := count(false)
	t.Logf("JetStream API requests to open the bus: %d fresh, %d not", fresh, full)
	require.Less(t, fresh, full)
}

// TestOpenFreshOnProvisionedServer: Fresh on a server that already holds
// manifold's streams opens it when their configuration is the same (a
// create of an identical stream is accepted) and fails, naming the
// stream, when it differs.
func TestOpenFreshOnProvisionedServer(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	_, err := openOn(t, srv, bus.Config{})
	require.NoError(t, err)
	b, err := openOn(t, srv, bus.Config{Fresh: true})
	require.NoError(t, err)
	_, err = b.Runs().Put(ctxT(t), "k", []byte("v"))
	require.NoError(t, err)

	_, err = openOn(t, srv, bus.Config{Fresh: true, MemoryStorage: true})
	require.ErrorIs(t, err, jetstream.ErrStreamNameAlreadyInUse)
	require.ErrorContains(t, err, "bus: provision ")
}

// TestOpenOnDemand: a bus opened OnDemand leaves the assignments bucket,
// the store of tasks sent by reference, the reports store and the
// registrations stream to their first use: Open creates none, the first
// use creates each, and they work as provisioned ones do (a report stored
// and read; a registration made, looked up and removed; a large task
// travels by reference and is read back; the assignments list, empty, is
// read).
func TestOpenOnDemand(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	b, err := openOn(t, srv, bus.Config{MemoryStorage: true, Fresh: true, OnDemand: true, InlineMax: 4 << 10})
	require.NoError(t, err)
	js, err := jetstream.New(b.Conn())
	require.NoError(t, err)
	streams := func() []string {
		var out []string
		names := js.StreamNames(ctxT(t))
		for n := range names.Name() {
			out = append(out, n)
		}
		require.NoError(t, names.Err())
		return out
	}
	const assignments, tasks, reports = "KV_" + bus.BucketAssignments, "OBJ_" + bus.BucketTasks, "OBJ_" + bus.BucketReports
	opened := streams()
	require.NotContains(t, opened, assignments)
	require.NotContains(t, opened, tasks)
	require.NotContains(t, opened, reports)
	require.NotContains(t, opened, bus.StreamRegistrations)
	require.Contains(t, opened, "KV_"+bus.BucketRuns, "the others are provisioned")

	// The reports store: a report not stored is not found, then stored
	// and read back.
	_, err = b.GetReport(ctxT(t), "r0")
	require.ErrorIs(t, err, bus.ErrNotFound)
	require.Contains(t, streams(), reports)
	require.NoError(t, b.PutReport(ctxT(t), "r0", []byte(`{"run_id":"r0"}`)))
	got, err := b.GetReport(ctxT(t), "r0")
	require.NoError(t, err)
	require.JSONEq(t, `{"run_id":"r0"}`, string(got))

	// The registrations stream: an entry registered is looked up, then
	// deregistered; a lookup first on another on-demand bus finds none.
	entry := bus.RegistrationEntry{Cluster: "c", Protocol: "http", Service: "web", Address: "10.0.0.1", Port: 80, Priority: 1}
	require.NoError(t, b.Register(ctxT(t), entry))
	require.Contains(t, streams(), bus.StreamRegistrations)
	found, err := b.Registrations(ctxT(t), "c", "http", "web", "")
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.NoError(t, b.Deregister(ctxT(t), entry))
	found, err = b.Registrations(ctxT(t), "c", "http", "web", "")
	require.NoError(t, err)
	require.Empty(t, found)
	fresh, err := openOn(t, startServer(t), bus.Config{MemoryStorage: true, Fresh: true, OnDemand: true})
	require.NoError(t, err)
	found, err = fresh.Registrations(ctxT(t), "", "", "", "")
	require.NoError(t, err)
	require.Empty(t, found)

	list, err := b.ListAssignments(ctxT(t))
	require.NoError(t, err)
	require.Empty(t, list)
	require.Contains(t, streams(), assignments)

	big := bus.Task{RunID: "r1", Task: 2, Attempt: 1, Pool: "default", TimeoutMS: 1000}
	big.Resource.Type, big.Resource.Name = "file", "/tmp/big"
	big.Resource.Properties = map[string]any{"content": strings.Repeat("x", 64<<10)}
	require.NoError(t, b.PublishTaskAsync(ctxT(t), big).Wait(ctxT(t)))
	require.Contains(t, streams(), tasks)
	c, err := b.TaskConsumer(ctxT(t), "default")
	require.NoError(t, err)
	d, err := c.Next(ctxT(t))
	require.NoError(t, err)
	var env bus.Task
	require.NoError(t, bus.Decode(d.Data(), &env))
	require.NotEmpty(t, env.Ref, "sent by reference")
	full, err := b.ResolveTask(ctxT(t), env)
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("x", 64<<10), full.Resource.Properties["content"])

	// Without OnDemand, Open provisions both.
	other := startServer(t)
	provisioned, err := openOn(t, other, bus.Config{MemoryStorage: true, Fresh: true})
	require.NoError(t, err)
	js, err = jetstream.New(provisioned.Conn())
	require.NoError(t, err)
	all := streams()
	require.Contains(t, all, assignments)
	require.Contains(t, all, tasks)
	require.Contains(t, all, reports)
	require.Contains(t, all, bus.StreamRegistrations)
}

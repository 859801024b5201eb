package bus_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

func web(addr string, port int) bus.RegistrationEntry {
	return bus.RegistrationEntry{Cluster: "production", Service: "web", Protocol: "http", Address: addr, Port: port, Priority: 10, TTL: "10m"}
}

// TestRegistrationsLookupWildcardsAndRollup: entries are found by any
// combination of cluster, protocol, service and address ("*" wildcards),
// sorted; registering the same endpoint again replaces its entry.
func TestRegistrationsLookupWildcardsAndRollup(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	got, err := b.Registrations(ctx, "*", "*", "*", "*")
	require.NoError(t, err)
	require.Empty(t, got, "nothing registered yet")

	require.NoError(t, b.Register(ctx, web("10.0.0.2", 8080)))
	require.NoError(t, b.Register(ctx, web("10.0.0.1", 8080)))
	db := bus.RegistrationEntry{Cluster: "production", Service: "db", Protocol: "tcp", Address: "db1.example.com", Port: 5432, Priority: 1}
	require.NoError(t, b.Register(ctx, db))
	staging := web("10.1.0.1", 80)
	staging.Cluster = "staging"
	require.NoError(t, b.Register(ctx, staging))
	// Again, with other annotations: one entry, the newest.
	again := web("10.0.0.1", 8080)
	again.Annotations = map[string]string{"version": "2"}
	require.NoError(t, b.Register(ctx, again))

	got, err = b.Registrations(ctx, "production", "http", "web", "*")
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "10.0.0.1", got[0].Address)
	require.Equal(t, map[string]string{"version": "2"}, got[0].Annotations)
	require.Equal(t, "10.0.0.2", got[1].Address)
	require.Equal(t, 8080, got[1].Port)
	require.Equal(t, bus.Version, got[1].V)
	require.False(t, got[1].Time.IsZero())

	for _, q := range []struct {
		c, p, s, a string
		want       int
	}{
		{"*", "*", "*", "*", 4}, {"*", "http", "web", "*", 3}, {"production", "*", "*", "*", 3},
		{"*", "*", "db", "db1.example.com", 1}, {"*", "*", "*", "10.0.0.2", 1}, {"", "", "", "", 4}, {"nope", "*", "*", "*", 0},
	} {
		got, err := b.Registrations(ctx, q.c, q.p, q.s, q.a)
		require.NoError(t, err)
		require.Len(t, got, q.want, "%+v", q)
	}
}

// TestRegistrationExpiresWithTTL: an entry published with a 1s TTL is
// removed by the server (a delete marker takes its place) and is no
// longer returned, while one with a longer TTL stays.
func TestRegistrationExpiresWithTTL(t *testing.T) {
	srv, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	short := web("10.0.0.9", 80)
	short.TTL = "1s"
	require.NoError(t, b.Register(ctx, short))
	require.NoError(t, b.Register(ctx, web("10.0.0.1", 80)))
	got, err := b.Registrations(ctx, "production", "http", "web", "*")
	require.NoError(t, err)
	require.Len(t, got, 2)

	// Wait for the server's delete marker of the expired entry.
	nc, err := srv.Connect("watch")
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	c, err := js.OrderedConsumer(ctx, bus.StreamRegistrations, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.RegistrationSubject(short)}})
	require.NoError(t, err)
	for {
		msg, err := c.Next(jetstream.FetchMaxWait(10 * time.Second))
		require.NoError(t, err, "no delete marker within 10s of a 1s TTL")
		if msg.Headers().Get("Nats-Marker-Reason") != "" {
			break
		}
	}
	got, err = b.Registrations(ctx, "production", "http", "web", "*")
	require.NoError(t, err)
	require.Len(t, got, 1, "the expired entry is gone")
	require.Equal(t, "10.0.0.1", got[0].Address)

	// Deregister removes one at once.
	require.NoError(t, b.Deregister(ctx, web("10.0.0.1", 80)))
	got, err = b.Registrations(ctx, "*", "*", "*", "*")
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestRegistrationValidation: every rule names its field; limits are
// accepted at the limit and refused past it.
func TestRegistrationValidation(t *testing.T) {
	ok := web("10.0.0.1", 65535)
	ok.Priority = 255
	ok.TTL = "1s"
	for range bus.MaxRegistrationAnnotations {
		if ok.Annotations == nil {
			ok.Annotations = map[string]string{}
		}
		ok.Annotations[strings.Repeat("k", len(ok.Annotations)+1)] = "v"
	}
	require.NoError(t, ok.Validate())
	for _, e := range []string{"2001:db8::1", "web-1.example.com", "localhost"} {
		x := web(e, 80)
		require.NoError(t, x.Validate(), e)
	}
	for _, c := range []struct {
		mut  func(*bus.RegistrationEntry)
		want string
	}{
		{func(e *bus.RegistrationEntry) { e.Cluster = "" }, "cluster is required"},
		{func(e *bus.RegistrationEntry) { e.Service = "1web" }, `service "1web" must match`},
		{func(e *bus.RegistrationEntry) { e.Protocol = "h.t" }, `protocol "h.t" must match`},
		{func(e *bus.RegistrationEntry) { e.Address = "" }, "address is required"},
		{func(e *bus.RegistrationEntry) { e.Address = "web_1.example" }, "neither an IP address nor a host name"},
		{func(e *bus.RegistrationEntry) { e.Port = 65536 }, "port 65536 must be between 1 and 65535"},
		{func(e *bus.RegistrationEntry) { e.Priority = 0 }, "priority 0 must be between 1 and 255"},
		{func(e *bus.RegistrationEntry) { e.Priority = 256 }, "priority 256"},
		{func(e *bus.RegistrationEntry) { e.TTL = "999ms" }, `ttl "999ms": at least 1s`},
		{func(e *bus.RegistrationEntry) { e.TTL = "soon" }, `ttl "soon": a duration`},
		{func(e *bus.RegistrationEntry) { e.Annotations["one-more"] = "v" }, "65 annotations, at most 64"},
	} {
		e := ok
		e.Annotations = map[string]string{}
		for k, v := range ok.Annotations {
			e.Annotations[k] = v
		}
		c.mut(&e)
		err := e.Validate()
		require.ErrorIs(t, err, bus.ErrRegistrationInvalid, c.want)
		require.ErrorContains(t, err, c.want)
	}
	// An entry too large for one message is refused before publishing.
	_, b := bustest.Start(t, bus.Config{})
	big := web("10.0.0.1", 80)
	big.Annotations = map[string]string{"blob": strings.Repeat("x", bus.MaxRegistrationBytes)}
	require.ErrorIs(t, b.Register(ctxT(t), big), bus.ErrTooLarge)
}

package bus_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// A bundle overwritten under its digest name by another writer (a
// submitter's `nats obj put`) is refused on read with an error naming it,
// and storing the real bundle again writes it, although the name exists.
func TestBundleOverwrittenUnderItsDigestIsRefused(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{})
	ctx := ctxT(t)
	real := bytes.Repeat([]byte("real bundle "), 1000)
	name, err := b.PutBundle(ctx, real)
	require.NoError(t, err)

	js, err := jetstream.New(b.Conn())
	require.NoError(t, err)
	store, err := js.ObjectStore(ctx, bus.BucketBundles)
	require.NoError(t, err)
	_, err = store.PutBytes(ctx, name, []byte("evil bundle"))
	require.NoError(t, err)

	_, err = b.GetBundle(ctx, name)
	require.ErrorIs(t, err, bus.ErrDigestMismatch)
	require.Contains(t, err.Error(), name)

	// The same bytes uploaded again replace the impostor.
	again, err := b.PutBundle(ctx, real)
	require.NoError(t, err)
	require.Equal(t, name, again)
	got, err := b.GetBundle(ctx, name)
	require.NoError(t, err)
	require.Equal(t, real, got)

	// A name of the bundles store that states no digest is refused too.
	_, err = store.PutBytes(ctx, "latest", real)
	require.NoError(t, err)
	_, err = b.GetBundle(ctx, "latest")
	require.ErrorIs(t, err, bus.ErrDigestMismatch)
	// obj:// keys of digest form are verified as well.
	_, err = b.GetBundle(ctx, "obj://"+bus.BucketBundles+"/"+name)
	require.NoError(t, err)
	require.NoError(t, b.PutObject(ctx, "site", name, []byte("evil")))
	_, err = b.GetBundle(ctx, "obj://site/"+name)
	require.ErrorIs(t, err, bus.ErrDigestMismatch)
}

// A task sent by reference is stored in the tasks store, which only
// coordinators write, without its tokens: they travel in the message and
// ResolveTask puts them back. A body overwritten in the store is refused.
func TestTaskByReferenceKeepsItsTokensInTheMessage(t *testing.T) {
	_, b := bustest.Start(t, bus.Config{InlineMax: 4 << 10})
	ctx := ctxT(t)
	big := bus.Task{RunID: "r1", Task: 2, Attempt: 1, Pool: "default", Token: "tok-2"}
	big.Resource.Type, big.Resource.Name = "file", "/tmp/big"
	big.Resource.Properties = map[string]any{"content": strings.Repeat("x", 200<<10)}
	item := bus.SegmentItem{Task: 3, Attempt: 1, Token: "tok-3"}
	item.Resource.Type, item.Resource.Name = "file", "/tmp/next"
	big.Segment = []bus.SegmentItem{item}
	require.NoError(t, b.PublishTaskAsync(ctx, big).Wait(ctx))

	c, err := b.TaskConsumer(ctx, "default")
	require.NoError(t, err)
	d, err := c.Next(ctx)
	require.NoError(t, err)
	var env bus.Task
	require.NoError(t, bus.Decode(d.Data(), &env))
	require.True(t, strings.HasPrefix(env.Ref, "task-sha256-"), env.Ref)
	require.Equal(t, "tok-2", env.Token)
	require.Equal(t, []string{"tok-3"}, env.SegmentTokens)

	js, err := jetstream.New(b.Conn())
	require.NoError(t, err)
	store, err := js.ObjectStore(ctx, bus.BucketTasks)
	require.NoError(t, err)
	body, err := store.GetBytes(ctx, env.Ref)
	require.NoError(t, err)
	require.NotContains(t, string(body), "tok-", "tokens must not be stored where every worker can read them")
	_, err = js.ObjectStore(ctx, bus.BucketBundles)
	require.NoError(t, err)

	full, err := b.ResolveTask(ctx, env)
	require.NoError(t, err)
	require.Equal(t, "tok-2", full.Token)
	require.Len(t, full.Segment, 1)
	require.Equal(t, "tok-3", full.Segment[0].Token)
	require.Equal(t, "file#/tmp/big", full.Resource.Ref())

	_, err = store.PutBytes(ctx, env.Ref, []byte(`{"v":1,"run_id":"r1","task":2,"attempt":1}`))
	require.NoError(t, err)
	_, err = b.ResolveTask(ctx, env)
	require.ErrorIs(t, err, bus.ErrDigestMismatch)
}

// An outcome's MAC covers every decisive field; the fields a replay
// changes (Replayed, Delivery) are left out, and a fact signed with the
// run's secret is not a worker outcome signed with a token, nor the other
// way round.
func TestOutcomeMAC(t *testing.T) {
	secret := bytes.Repeat([]byte{1}, bus.RunSecretSize)
	token := bus.TaskToken(secret, "r1", 4, 2)
	require.NotEqual(t, token, bus.TaskToken(secret, "r1", 4, 3))
	require.NotEqual(t, token, bus.TaskToken(secret, "r2", 4, 2))
	require.NotEqual(t, token, bus.TaskToken(bytes.Repeat([]byte{2}, bus.RunSecretSize), "r1", 4, 2))

	base := bus.Outcome{RunID: "r1", Task: 4, Attempt: 2, Ref: "exec#x", Status: bus.TaskFailed, Error: "exit 1",
		Worker: "w1", DurationMS: 12, HealthChecks: []bus.HealthCheck{{Name: "h", Status: "OK", Tries: 1}}}
	signed := base
	bus.SignOutcome(&signed, token)
	require.True(t, bus.VerifyOutcome(signed, token))
	require.False(t, bus.VerifyFact(signed, secret), "a token's MAC is no coordinator fact")

	replayed := signed
	replayed.Replayed, replayed.Delivery = true, 3
	require.True(t, bus.VerifyOutcome(replayed, token), "a replay keeps its record's MAC")

	for name, tamper := range map[string]func(*bus.Outcome){
		"status":       func(o *bus.Outcome) { o.Status = bus.TaskChanged },
		"changed":      func(o *bus.Outcome) { o.Changed = true },
		"refreshed":    func(o *bus.Outcome) { o.Refreshed = true },
		"error":        func(o *bus.Outcome) { o.Error = "" },
		"message":      func(o *bus.Outcome) { o.Message = "ok" },
		"diff":         func(o *bus.Outcome) { o.Diff = "+x" },
		"task":         func(o *bus.Outcome) { o.Task = 5 },
		"attempt":      func(o *bus.Outcome) { o.Attempt = 3 },
		"run":          func(o *bus.Outcome) { o.RunID = "r2" },
		"kind":         func(o *bus.Outcome) { o.Kind = bus.FactCancel },
		"worker":       func(o *bus.Outcome) { o.Worker = "w2" },
		"health check": func(o *bus.Outcome) { o.HealthChecks[0].Status = "CRITICAL" },
		"no mac":       func(o *bus.Outcome) { o.MAC = "" },
	} {
		o := signed
		o.HealthChecks = append([]bus.HealthCheck(nil), signed.HealthChecks...)
		tamper(&o)
		require.False(t, bus.VerifyOutcome(o, token), name)
	}

	fact := bus.Outcome{RunID: "r1", Kind: bus.FactCancel}
	bus.SignFact(&fact, secret)
	require.True(t, bus.VerifyFact(fact, secret))
	require.False(t, bus.VerifyOutcome(fact, token))
	child := bus.ChildSecret(secret, "r1-a3")
	require.Len(t, child, 32)
	require.False(t, bus.VerifyFact(fact, child))
	unsigned := base
	bus.SignOutcome(&unsigned, "")
	require.Empty(t, unsigned.MAC, "a task without a token (an older coordinator's) gets no MAC")
}

// KeepBundle names a bundle as PutBundle does and refuses one over the
// limit; its Bus reads it from memory, and nothing is put in the store:
// another Bus of the server finds nothing.
func TestKeepBundle(t *testing.T) {
	srv, b := bustest.Start(t, bus.Config{MaxBundleBytes: 1 << 20})
	ctx := ctxT(t)
	archive := bytes.Repeat([]byte("kept bundle "), 1000)

	name, err := b.KeepBundle(archive)
	require.NoError(t, err)
	got, err := b.GetBundle(ctx, name)
	require.NoError(t, err)
	require.Equal(t, archive, got)
	other := bustest.Open(t, srv, bus.Config{MaxBundleBytes: 1 << 20})
	_, err = other.GetBundle(ctx, name)
	require.ErrorIs(t, err, bus.ErrNotFound)

	put, err := b.PutBundle(ctx, archive)
	require.NoError(t, err)
	require.Equal(t, put, name, "the name PutBundle gives")

	name, err = b.KeepBundle(make([]byte, 1<<20+1))
	require.ErrorIs(t, err, bus.ErrTooLarge)
	require.Empty(t, name)
}

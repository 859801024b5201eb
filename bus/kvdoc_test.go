package bus_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/deploy"
)

// bucketGrant is what README.md (KV entries) tells operators to add to the
// worker's publish permissions for kv:// documents in bucket "apps".
const bucketGrant = `
      "$JS.API.STREAM.INFO.KV_apps"
      "$JS.API.DIRECT.GET.KV_apps.>"
      "$JS.API.STREAM.MSG.GET.KV_apps"
      "$KV.apps.>"`

// rolesServer starts a server whose users have the permissions of
// deploy/nats/accounts.conf, as `manifold server` gives its nkeys:
// "worker" (WORKER_PERMISSIONS), "granted" (the worker's plus
// bucketGrant) and "admin" (anything).
func rolesServer(t *testing.T) *bus.Server {
	t.Helper()
	perms := deploy.AccountsConf
	perms = perms[:strings.Index(perms, "\naccounts {")]
	// Attach also opens the cancels bucket; until accounts.conf grants its
	// stream info to workers (work in progress elsewhere), add it here so
	// this test is about document buckets only. A no-op once granted.
	if cancels := `"$JS.API.STREAM.INFO.KV_manifold-cancels"`; !strings.Contains(perms, cancels) {
		perms = strings.Replace(perms, `"$JS.API.STREAM.INFO.KV_manifold-results"`, `"$JS.API.STREAM.INFO.KV_manifold-results"`+"\n      "+cancels, -1)
	}
	i := strings.Index(perms, "WORKER_PERMISSIONS = {")
	j := i + strings.Index(perms[i:], "\n}\n") + 3
	granted := strings.Replace(perms[i:j], "WORKER_PERMISSIONS", "GRANTED_PERMISSIONS", 1)
	granted = strings.Replace(granted, "allow: [", "allow: ["+bucketGrant, 1)
	conf := perms + granted + `
authorization {
  users: [
    {user: worker, password: w, permissions: $WORKER_PERMISSIONS}
    {user: granted, password: g, permissions: $GRANTED_PERMISSIONS}
    {user: admin, password: a}
    {user: coordinator, password: c, permissions: $COORDINATOR_PERMISSIONS}
    {user: client, password: s, permissions: $CLIENT_PERMISSIONS}
  ]
}
`
	srv, err := bus.StartServer(bus.ServerConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", Config: conf})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	return srv
}

func connectUser(t *testing.T, srv *bus.Server, user, password string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	if user == "worker" || user == "granted" {
		// The worker role reads replies under its own inbox prefix only.
		opts = append(opts, nats.CustomInboxPrefix(bus.WorkerInboxPrefix))
	}
	nc, err := nats.Connect(srv.ClientURL(), append(opts, nats.UserInfo(user, password))...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// TestDocumentKVPermissionDenied: a worker not granted a bucket fails at
// once with ErrPermissionDenied naming the bucket, not at its deadline;
// a worker granted the bucket (README: KV entries) reads and writes it;
// manifold's own buckets are refused to everyone.
func TestDocumentKVPermissionDenied(t *testing.T) {
	srv := rolesServer(t)
	ctx := ctxT(t)
	admin, err := bus.Open(ctx, connectUser(t, srv, "admin", "a"), bus.Config{})
	require.NoError(t, err)
	_, err = admin.EnsureDocumentBucket(ctx, "apps")
	require.NoError(t, err)

	// The connection's own error handler keeps being called.
	handled := make(chan error, 16)
	wnc := connectUser(t, srv, "worker", "w", nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case handled <- err:
		default:
		}
	}))
	worker, err := bus.Attach(ctx, wnc, bus.Config{})
	require.NoError(t, err)
	start := time.Now()
	_, err = worker.DocumentKV(ctx, "apps")
	require.ErrorIs(t, err, bus.ErrPermissionDenied)
	require.Contains(t, err.Error(), "bucket apps")
	require.Less(t, time.Since(start), 2*time.Second, "the denial must not wait for the deadline")
	select {
	case err := <-handled:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
	case <-time.After(5 * time.Second):
		t.Fatal("the connection's error handler was not called")
	}

	for _, own := range []string{bus.BucketWorkers, bus.BucketResults, bus.BucketRuns, "manifold-new"} {
		_, err := worker.DocumentKV(ctx, own)
		require.ErrorIs(t, err, bus.ErrOwnBucket, own)
		_, err = admin.DocumentKV(ctx, own)
		require.ErrorIs(t, err, bus.ErrOwnBucket, own)
	}

	granted, err := bus.Attach(ctx, connectUser(t, srv, "granted", "g"), bus.Config{})
	require.NoError(t, err)
	kv, err := granted.DocumentKV(ctx, "apps")
	require.NoError(t, err)
	rev, ok, err := kv.Create(ctx, "web", []byte(`{"a":1}`))
	require.NoError(t, err)
	require.True(t, ok)
	v, got, found, err := kv.Get(ctx, "web")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, rev, got)
	require.Equal(t, `{"a":1}`, string(v))
	_, ok, err = kv.Update(ctx, "web", []byte(`{"a":2}`), rev+7)
	require.NoError(t, err)
	require.False(t, ok, "a stale revision loses")
	_, ok, err = kv.Update(ctx, "web", []byte(`{"a":2}`), rev)
	require.NoError(t, err)
	require.True(t, ok)
}

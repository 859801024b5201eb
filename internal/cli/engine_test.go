package cli

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func quietEmbeddedOpts() embeddedOpts {
	return embeddedOpts{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxDepth: 8, MaxTreeRuns: 100, Concurrency: 2}
}

// consumersWaiting returns, per stream of the server behind js, how many
// consumers it has, and how many pull requests its consumers hold.
func consumersWaiting(ctx context.Context, t *testing.T, js jetstream.JetStream) (consumers map[string]int, waiting int) {
	t.Helper()
	consumers = map[string]int{}
	streams := js.ListStreams(ctx)
	for si := range streams.Info() {
		consumers[si.Config.Name] = si.State.Consumers
		s, err := js.Stream(ctx, si.Config.Name)
		require.NoError(t, err)
		infos := s.ListConsumers(ctx)
		for ci := range infos.Info() {
			waiting += ci.NumWaiting
		}
		require.NoError(t, infos.Err())
	}
	require.NoError(t, streams.Err())
	return consumers, waiting
}

// TestDropStreamsDeletesOnlyStreamsWithConsumers: before the embedded
// server shuts down, the streams with consumers (the worker's and the
// coordinator's, which may hold pull requests) are deleted, so that the
// shutdown has no pull request to signal (it would wait 50 ms), and only
// those: one list request and a delete per stream with consumers, not a
// delete of every stream.
func TestDropStreamsDeletesOnlyStreamsWithConsumers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := startEmbedded(ctx, quietEmbeddedOpts())
	require.NoError(t, err)
	defer e.close()
	js, err := jetstream.New(e.bus.Conn())
	require.NoError(t, err)
	// The worker and the coordinator pull as soon as they start: wait for
	// their requests to reach the server.
	for waiting := 0; waiting == 0; {
		_, waiting = consumersWaiting(ctx, t, js)
		require.NoError(t, ctx.Err(), "no pull request reached the server")
	}
	// Stopped, they leave their consumers (and pull requests) behind.
	e.worker.Kill()
	e.coord.Stop()
	consumers := map[string]int{}
	for si := range js.ListStreams(ctx).Info() {
		consumers[si.Config.Name] = si.State.Consumers
	}
	withConsumers := 0
	for _, n := range consumers {
		if n > 0 {
			withConsumers++
		}
	}

	spy, err := e.srv.Connect("spy")
	require.NoError(t, err)
	defer spy.Close()
	sub, err := spy.SubscribeSync("$JS.API.>")
	require.NoError(t, err)
	require.NoError(t, spy.Flush())
	dropStreams(e.bus.Conn())
	require.NoError(t, spy.Flush()) // every request's copy is queued before the flush's reply
	deletes := 0
	for {
		m, err := sub.NextMsg(0)
		if err != nil {
			break
		}
		if strings.HasPrefix(m.Subject, "$JS.API.STREAM.DELETE.") {
			deletes++
		}
	}
	// A consumer the coordinator removes as it stops may be gone by then.
	require.True(t, deletes >= 1 && deletes <= withConsumers, "%d streams deleted; streams and their consumers before: %v", deletes, consumers)
	left, _ := consumersWaiting(ctx, t, js)
	for name, n := range left {
		require.Zero(t, n, "stream %s keeps consumers for the shutdown to signal", name)
	}
}

// BenchmarkEmbeddedStartStop is the fixed cost of the embedded engine of
// `manifold apply`: server, streams and buckets, coordinator and worker
// started, then stopped and the store removed (go test -bench
// EmbeddedStartStop -benchmem -cpuprofile FILE ./internal/cli).
func BenchmarkEmbeddedStartStop(b *testing.B) {
	o := quietEmbeddedOpts()
	for b.Loop() {
		e, err := startEmbedded(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		e.close()
	}
}

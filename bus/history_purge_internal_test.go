package bus

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// PurgeHistory removes one run's facts and no other's, with one
// JetStream request (no stream info asked first).
func TestPurgeHistoryIsOneRequest(t *testing.T) {
	srv, b := startReportBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, run := range []string{"run-a", "run-b"} {
		for task := range 3 {
			require.NoError(t, b.PublishFact(ctx, Outcome{RunID: run, Task: task, Status: TaskStable}, ""))
		}
	}
	api, flush := countRequests(t, srv, "$JS.API.>")
	require.NoError(t, b.PurgeHistory(ctx, "run-a"))
	flush(b.apiPrefix() + "STREAM.PURGE." + StreamHistory)
	require.Equal(t, int64(1), api.Load(), "JetStream requests of one purge")

	st, err := b.js.Stream(ctx, StreamHistory)
	require.NoError(t, err)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(SubjectOutcomesAll))
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{OutcomeSubject("run-b"): 3}, info.State.Subjects)
}

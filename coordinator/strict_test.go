package coordinator_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
)

// TestRequestsDecodedStrictly: an API request or a run request with a field
// the coordinator does not know (a misspelt "noop") is refused as invalid,
// never run with the field ignored.
func TestRequestsDecodedStrictly(t *testing.T) {
	tb := setup(t, setupOpts{noWorker: true})
	nc := tb.bus.Conn()
	for subject, body := range map[string]string{
		bus.SubjectAPIRunsSubmit:        `{"manifest_yaml": "resources: []\n", "nooop": true}`,
		bus.SubjectAPIRunsGet:           `{"run_id": "r1", "verbose": true}`,
		bus.SubjectAPIRunsList:          `{"limit": 1, "offset": 5}`,
		bus.SubjectAPIRunsCancel:        `{"run_id": "r1", "force": true}`,
		bus.SubjectAPIManifestsValidate: `{"manifest_yaml": "resources: []\n", "strict": true}`,
	} {
		msg, err := nc.Request(subject, []byte(body), 10*time.Second)
		require.NoError(t, err, subject)
		var reply bus.ErrorReply
		require.NoError(t, json.Unmarshal(msg.Data, &reply), subject)
		require.NotNil(t, reply.Error, "%s accepted %s: %s", subject, body, msg.Data)
		require.Equal(t, bus.APIInvalid, reply.Error.Code, subject)
		require.Contains(t, reply.Error.Message, "unknown field", subject)
	}
	// The envelope version is accepted, known fields work.
	msg, err := nc.Request(bus.SubjectAPIRunsList, []byte(`{"v": 1, "limit": 1}`), 10*time.Second)
	require.NoError(t, err)
	require.NotContains(t, string(msg.Data), `"error"`)

	// Fire and forget: the run is rejected, saying why.
	_, err = nc.Request(bus.SubjectRunSubmit, []byte(`{"v": 1, "run_id": "strict-1", "manifest_yaml": "resources: []\n", "nooop": true}`), 10*time.Second)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), runDeadline)
	defer cancel()
	var finished bus.Event
	require.NoError(t, tb.bus.FollowEvents(ctx, "strict-1", func(ev bus.Event) bool {
		if ev.Kind == bus.EventRunFinished {
			finished = ev
			return false
		}
		return true
	}))
	require.Equal(t, "failed", finished.Status)
	require.Contains(t, finished.Error, `unknown field "nooop"`)
}

package coordinator_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
)

// TestAmbiguousKeysRefused: a run request that repeats a key or spells a
// field in another case ({"noop": true, "NOOP": false}) is refused with
// an error naming the key, on the API and on the submit stream: what runs
// must be what a reader of the request sees.
func TestAmbiguousKeysRefused(t *testing.T) {
	tb := setup(t, setupOpts{noWorker: true})
	nc := tb.bus.Conn()
	for body, want := range map[string]string{
		`{"manifest_yaml": "resources: []\n", "noop": true, "NOOP": false}`: `"NOOP" is not the field "noop": keys are case-sensitive`,
		`{"manifest_yaml": "resources: []\n", "noop": true, "noop": false}`: `"noop" appears twice`,
	} {
		msg, err := nc.Request(bus.SubjectAPIRunsSubmit, []byte(body), 10*time.Second)
		require.NoError(t, err)
		var reply bus.ErrorReply
		require.NoError(t, json.Unmarshal(msg.Data, &reply))
		require.NotNil(t, reply.Error, "accepted %s: %s", body, msg.Data)
		require.Equal(t, bus.APIInvalid, reply.Error.Code)
		require.Contains(t, reply.Error.Message, want)
	}

	_, err := nc.Request(bus.SubjectRunSubmit, []byte(`{"v": 1, "run_id": "ambiguous-1", "manifest_yaml": "resources: []\n", "noop": true, "NOOP": false}`), 10*time.Second)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), runDeadline)
	defer cancel()
	var rejected, finished bus.Event
	require.NoError(t, tb.bus.FollowEvents(ctx, "ambiguous-1", func(ev bus.Event) bool {
		switch ev.Kind {
		case bus.EventRunRejected:
			rejected = ev
		case bus.EventRunFinished:
			finished = ev
			return false
		}
		return true
	}))
	require.Equal(t, bus.EventRunRejected, rejected.Kind)
	require.Equal(t, "failed", finished.Status)
	require.Contains(t, finished.Error, `"NOOP" is not the field "noop": keys are case-sensitive`)
}

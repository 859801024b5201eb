package worker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRegistrationEncodingMatchesMarshal: the registration a heartbeat
// writes, its facts encoded once per facts map, has the bytes
// json.Marshal gives of the Registration, and the digest is factsDigest's,
// with no facts, empty facts, nested facts, and values that need escaping.
func TestRegistrationEncodingMatchesMarshal(t *testing.T) {
	t.Parallel()
	seen := time.Date(2026, 11, 27, 9, 30, 0, 123, time.UTC)
	for name, facts := range map[string]map[string]any{
		"nil":    nil,
		"empty":  {},
		"nested": {"host": map[string]any{"info": map[string]any{"os": "linux", "cpus": 2}}, "ips": []any{"10.0.0.1", "::1"}, "b": true},
		"escape": {"motd": "<a & b>\u2028\"q\"", "z": nil, "n": 1.5},
	} {
		t.Run(name, func(t *testing.T) {
			reg := Registration{Name: "w1", Pools: []string{"web", "default"}, Concurrency: 2,
				Running: []string{"t1 file#/a"}, Version: "v1", Facts: facts, Started: seen.Add(-time.Hour), Seen: seen,
				Assignments: map[string]AssignmentStatus{"site": {}}, Fleet: &FleetStatus{}}
			want, err := json.Marshal(reg)
			require.NoError(t, err)
			var enc factsEncoding
			f := enc.encode(reg.Facts)
			got, err := json.Marshal(registrationJSON{Name: reg.Name, Pools: reg.Pools, Concurrency: reg.Concurrency,
				Running: reg.Running, Version: reg.Version, Facts: f.json, Started: reg.Started, Seen: reg.Seen,
				Assignments: reg.Assignments, Fleet: reg.Fleet})
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
			require.Equal(t, factsDigest(facts), f.digest)
		})
	}
}

// TestFactsEncodedOncePerRefresh: heartbeats of the same facts map do not
// encode it again; a refresh (a new map, even with equal contents) is
// encoded and digested anew.
func TestFactsEncodedOncePerRefresh(t *testing.T) {
	t.Parallel()
	var enc factsEncoding
	first := map[string]any{"gen": 1}
	for range 5 {
		f := enc.encode(first)
		require.JSONEq(t, `{"gen":1}`, string(f.json))
		require.Equal(t, factsDigest(first), f.digest)
	}
	require.Equal(t, 1, enc.encodes, "five heartbeats of one facts map encode it once")
	second := map[string]any{"gen": 2}
	f := enc.encode(second)
	require.JSONEq(t, `{"gen":2}`, string(f.json))
	require.Equal(t, factsDigest(second), f.digest)
	require.Equal(t, 2, enc.encodes)
	f = enc.encode(map[string]any{"gen": 2})
	require.Equal(t, factsDigest(second), f.digest)
	require.Equal(t, 3, enc.encodes, "a new map is encoded, whatever it holds")
	f = enc.encode(nil)
	require.Nil(t, f.json, "no facts: omitted from the registration")
	require.Equal(t, factsDigest(nil), f.digest)
	require.Equal(t, 4, enc.encodes)
	enc.encode(nil)
	require.Equal(t, 4, enc.encodes, "nil twice: encoded once")
}

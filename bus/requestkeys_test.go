package bus

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// A request that says one thing twice is refused by DecodeStrict, naming
// the key: encoding/json would take the last duplicate and match keys in
// any case, so {"noop": true, "NOOP": false} would run for real.
func TestDecodeStrictRefusesAmbiguousKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body, want string
	}{
		{`{"noop": true, "NOOP": false}`, `"NOOP" is not the field "noop": keys are case-sensitive`},
		{`{"Noop": true}`, `"Noop" is not the field "noop": keys are case-sensitive`},
		{`{"noop": true, "noop": false}`, `"noop" appears twice`},
		{`{"V": 1}`, `"V" is not the field "v"`},
		{`{"data": {"web": {"port": 80, "port": 8080}}}`, `"data.web.port" appears twice`},
		{`{"data": {"list": [{"a": 1, "a": 2}]}}`, `"data.list[0].a" appears twice`},
		{`{"facts": {"x.y": 1, "x.y": 2}}`, `"facts.\"x.y\"" appears twice`},
	}
	for _, tt := range tests {
		var rr RunRequest
		err := DecodeStrict([]byte(tt.body), &rr)
		require.Error(t, err, tt.body)
		require.True(t, errors.Is(err, ErrAmbiguousKey), "%s: %v", tt.body, err)
		require.Contains(t, err.Error(), tt.want, tt.body)
	}

	// Keys of run data are case-sensitive map keys: distinct, kept.
	var rr RunRequest
	require.NoError(t, DecodeStrict([]byte(`{"v": 1, "noop": true, "data": {"Web": 1, "web": 2}, "facts": {"NOOP": 1}}`), &rr))
	require.True(t, rr.Noop)
	require.Equal(t, map[string]any{"Web": float64(1), "web": float64(2)}, rr.Data)

	// Other requests are held to the same rule.
	var g GetRunRequest
	require.ErrorIs(t, DecodeStrict([]byte(`{"run_id": "a", "RUN_ID": "b"}`), &g), ErrAmbiguousKey)
	// Not JSON: the decoder's own error, not a key error.
	err := DecodeStrict([]byte(`{"noop": tru`), &rr)
	require.Error(t, err)
	require.False(t, errors.Is(err, ErrAmbiguousKey))
}

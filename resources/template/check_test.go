package template

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain text", "hello", ""},
		{"valid lookup", "{{ lookup('facts.host.info.os') }}", ""},
		{"valid mixed", "a ${ upper(lookup('data.x')) } b {{ 1 + 2 }}", ""},
		{"escaped opener", `\{{ not a template`, ""},
		{"unclosed", "x {{ lookup('data.a') ", `"{{" at offset 2 has no closing "}}"`},
		{"unknown function", "{{ nosuch('a') }}", `expression "nosuch('a')"`},
		{"syntax error", "{{ 1 + }}", `expression "1 +"`},
		{"empty expression", "{{ }}", "empty expression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Check(tt.in)
			if tt.want == "" {
				require.NoError(t, err, tt.in)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestCheckValueNamesThePath(t *testing.T) {
	t.Parallel()
	v := map[string]any{
		"ok":  "{{ lookup('data.a') }}",
		"env": []any{"A=1", "B={{ nosuch() }}"},
		"z":   "{{ 1 +",
	}
	err := CheckValue(v)
	var pe *PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "env.1", pe.Path, "keys are visited in sorted order")
	require.NoError(t, CheckValue(map[string]any{"a": 1, "b": []string{"x"}, "c": map[string]string{"d": "${ 2 }"}}))
}

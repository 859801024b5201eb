package template

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Jet bound's error names the template and line of the block or loop
// that went past it.
func TestJetLimitErrorsNameTheLine(t *testing.T) {
	t.Parallel()
	_, err := Render("{{ jet(lookup('data.t')) }}", Scope{Data: map[string]any{
		"t": "x\ny\n[[ block r() ]][[ yield r() ]][[ end ]]"}})
	require.ErrorIs(t, err, ErrLimit)
	require.ErrorContains(t, err, "/inline:3: template: evaluation limit exceeded: Jet blocks")

	_, err = Render("{{ jet(lookup('data.t')) }}", Scope{Data: map[string]any{
		"t": "x\n[[ range Data.l ]][[ range Data.l ]][[ end ]][[ end ]]", "l": make([]any, 100_000)},
		Deadline: time.Now().Add(100 * time.Millisecond)})
	require.ErrorIs(t, err, ErrLimit)
	require.ErrorContains(t, err, "/inline:2: template: evaluation limit exceeded: evaluation took longer than")
}

package worker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/resources/template"
)

// The resources of a segment render over one reusable scope while their
// data, facts, environment and directory are the segment's: each renders
// its own text, an expression of the same value is evaluated once for
// the segment, and a resource with other data starts a scope of its own.
// Without a segment (nil) a task renders over its own scope.
func TestSegmentScopeSharedWhileTheSameMaps(t *testing.T) {
	data := map[string]any{"greeting": "hello"}
	facts := map[string]any{"node": "n1"}
	env := map[string]string{"HOME": "/root"}
	base := func(d map[string]any) template.Scope {
		return template.Scope{Data: d, Facts: facts, Environ: env, Dir: "/bundle"}
	}
	seg := &segmentScope{}
	render := func(s template.Scope, text string) string {
		t.Helper()
		v, err := template.Render(text, s)
		require.NoError(t, err)
		return v.(string)
	}
	first := seg.scope(base(data))
	require.Equal(t, "hello from 1 on n1", render(first, "{{ lookup('data.greeting') }} from 1 on {{ facts.node }}"))
	made := seg.data
	second := seg.scope(base(data))
	require.Equal(t, "hello from 2 on n1", render(second, "{{ lookup('data.greeting') }} from 2 on {{ facts.node }}"))
	require.Equal(t, made, seg.data)
	const text = "{{ lookup('data.greeting') }} from 4 on {{ facts.node }}"
	shared := testing.AllocsPerRun(50, func() { _, _ = template.RenderValue(map[string]any{"content": text}, seg.scope(base(data))) })
	own := testing.AllocsPerRun(50, func() { _, _ = template.RenderValue(map[string]any{"content": text}, base(data)) })
	t.Logf("allocations per resource: segment scope %.0f, own scope %.0f", shared, own)
	require.Less(t, shared, own-10, "the segment's environment is made once")

	other := map[string]any{"greeting": "bye"}
	third := seg.scope(base(other))
	require.Equal(t, "bye from 3", render(third, "{{ lookup('data.greeting') }} from 3"))
	require.NotEqual(t, made, seg.data, "other data: a scope of its own")

	var none *segmentScope
	alone := none.scope(base(data))
	require.Equal(t, "hello", render(alone, "{{ lookup('data.greeting') }}"))
}

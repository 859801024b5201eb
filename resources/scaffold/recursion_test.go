package scaffold

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/resources/template"
)

// A recursive block or a template including itself overflowed the
// worker's stack (a fatal error); they now fail the resource.
func TestRecursiveTemplatesAreBounded(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]source{
		"block":   {"a.conf": []byte("[[ block r() ]][[ yield r() ]][[ end ]]")},
		"include": {"a.conf": []byte(`[[ include "/a.conf" ]]`)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := render(src, EngineJet, "[[", "]]", false, template.Scope{}, defaultLimits)
			require.ErrorIs(t, err, template.ErrLimit)
			require.ErrorContains(t, err, "a.conf")
		})
	}
}

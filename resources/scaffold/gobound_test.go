package scaffold

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/resources/template"
)

// The go engine is bounded like Jet: a template calling itself (Go's own
// bound, 100,000 calls, took some 600 MB of stack), a loop writing
// nothing, and a loop writing without end each fail the resource with an
// error naming the file and wrapping template.ErrLimit.
func TestGoTemplatesAreBounded(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ text, want string }{
		"recursion":    {`{{ define "r" }}{{ template "r" }}{{ end }}{{ template "r" }}`, "nested more than 1000 deep"},
		"output":       {`{{ range 1000000000 }}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{{ end }}`, "a.conf renders over 1048576 bytes"},
		"render chain": {`{{ range 1000000000 }}{{ render "_partials/p" . }}{{ end }}`, "a.conf renders over 1048576 bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := source{"a.conf": []byte(c.text), "_partials/p": []byte(strings.Repeat("x", 1024))}
			start := time.Now()
			_, err := render(src, EngineGo, "{{", "}}", false, template.Scope{}, defaultLimits)
			require.ErrorIs(t, err, template.ErrLimit)
			require.ErrorIs(t, err, ErrRender)
			require.ErrorContains(t, err, "a.conf")
			require.ErrorContains(t, err, c.want)
			require.Less(t, time.Since(start), 10*time.Second)
		})
	}
}

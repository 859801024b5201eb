package template

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	texttemplate "text/template"
	"time"

	"github.com/stretchr/testify/require"
)

func parseGo(t *testing.T, text string) *texttemplate.Template {
	t.Helper()
	tpl, err := texttemplate.New("a.conf").Parse(text)
	require.NoError(t, err)
	return tpl
}

// A template calling itself: Go's own bound (100,000 calls deep) took
// some 600 MB of stack to reach; ExecuteGo stops at MaxNesting.
func TestGoRecursionIsBounded(t *testing.T) {
	t.Parallel()
	start := time.Now()
	err := ExecuteGo(parseGo(t, `{{define "r"}}{{template "r"}}{{end}}{{template "r"}}`), io.Discard, nil, 1<<20, time.Time{})
	require.ErrorIs(t, err, ErrLimit)
	require.ErrorContains(t, err, fmt.Sprintf("nested more than %d deep", MaxNesting))
	require.ErrorContains(t, err, `a.conf:1:14: executing "r": template: evaluation limit exceeded`)
	require.NotContains(t, err.Error(), goEnter)
	require.Less(t, time.Since(start), 5*time.Second)
}

// MaxNesting levels pass; one more fails.
func TestGoNestingAtTheLimit(t *testing.T) {
	t.Parallel()
	const text = `{{define "r"}}{{with .n}}{{template "r" .}}{{end}}{{end}}{{template "r" .}}`
	chain := func(k int) any {
		var v any = map[string]any{"end": true}
		for range k {
			v = map[string]any{"n": v}
		}
		return v
	}
	// The root is one level, then k+1 calls of r.
	require.NoError(t, ExecuteGo(parseGo(t, text), io.Discard, chain(MaxNesting-2), 1<<20, time.Time{}))
	require.ErrorIs(t, ExecuteGo(parseGo(t, text), io.Discard, chain(MaxNesting-1), 1<<20, time.Time{}), ErrLimit)
}

// A loop writing nothing never meets the output bound: the deadline ends
// it.
func TestGoLoopDeadline(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{
		"range": "x\n{{ range 1000000000 }}{{ end }}",
		"if":    "x\n{{ range 1000000000 }}{{ if true }}{{ end }}{{ end }}",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			err := ExecuteGo(parseGo(t, text), io.Discard, nil, 1<<20, time.Now().Add(200*time.Millisecond))
			require.ErrorIs(t, err, ErrLimit)
			require.ErrorContains(t, err, "took longer than 200ms")
			require.ErrorContains(t, err, "a.conf:2:")
			require.Less(t, time.Since(start), 5*time.Second)
		})
	}
}

// Past MaxGoSteps loop iterations the evaluation stops, deadline or not.
func TestGoStepBudget(t *testing.T) { //nolint:paralleltest // lowers maxGoSteps
	maxGoSteps = 1000
	t.Cleanup(func() { maxGoSteps = MaxGoSteps })
	require.NoError(t, ExecuteGo(parseGo(t, "{{ range 999 }}{{ end }}"), io.Discard, nil, 1<<20, time.Time{}))
	err := ExecuteGo(parseGo(t, "{{ range 1001 }}{{ end }}"), io.Discard, nil, 1<<20, time.Time{})
	require.ErrorIs(t, err, ErrLimit)
	require.ErrorContains(t, err, "more than 1000 loop iterations")
}

// The output is bounded while it is written, not once it is built.
func TestGoOutputIsBoundedWhileWriting(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	leaf := strings.Repeat("x", 1024)
	err := ExecuteGo(parseGo(t, "{{ range 1000000000 }}"+leaf+"{{ end }}"), &out, nil, 64<<10, time.Time{})
	require.ErrorIs(t, err, ErrLimit)
	require.ErrorIs(t, err, ErrFileTooLarge)
	require.ErrorContains(t, err, "a.conf renders over 65536 bytes")
	require.LessOrEqual(t, out.Len(), 64<<10)
}

// The hidden functions cannot be called by a template: it does not parse.
func TestGoHiddenFunctionsAreNotCallable(t *testing.T) {
	t.Parallel()
	for _, name := range []string{goEnter, goLeave, goTick} {
		_, err := texttemplate.New("a.conf").Parse("{{ " + name + " }}")
		require.ErrorContains(t, err, "not defined", name)
	}
	// A template's own error is still its own.
	err := ExecuteGo(parseGo(t, `{{ index . 5 }}`), io.Discard, []int{1}, 1<<20, time.Time{})
	require.Error(t, err)
	require.False(t, errors.Is(err, ErrLimit))
	// Output of a normal template is unchanged by the instrumentation.
	var out strings.Builder
	require.NoError(t, ExecuteGo(parseGo(t, `{{define "d"}}<{{.}}>{{end}}{{range .}}{{if .}}{{template "d" .}}{{else}}-{{end}}{{end}}`), &out, []int{1, 0, 2}, 1<<20, time.Time{}))
	require.Equal(t, "<1>-<2>", out.String())
}

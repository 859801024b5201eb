package template

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A block that yields itself recursed until the Go stack overflowed (a
// fatal error: the process died). It now stops at MaxNesting.
func TestJetRecursionIsBounded(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"inline":          "{{ jet('[[ block r() ]][[ yield r() ]][[ end ]]') }}",
		"inside try":      "{{ jet('[[ try ]][[ block r() ]][[ yield r() ]][[ end ]][[ catch e ]]caught[[ end ]]') }}",
		"mutual":          "{{ jet('[[ block a() ]][[ yield b() ]][[ end ]][[ block b() ]][[ yield a() ]][[ end ]]') }}",
		"through content": "{{ jet('[[ block r() ]][[ yield r() content ]]x[[ end ]][[ end ]]') }}",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Render(in, Scope{})
			require.ErrorIs(t, err, ErrLimit)
			require.ErrorContains(t, err, fmt.Sprintf("nested more than %d deep", MaxNesting))
			require.ErrorContains(t, err, "inline")
		})
	}
}

// MaxNesting levels pass; one more fails.
func TestJetNestingAtTheLimit(t *testing.T) {
	t.Parallel()
	// The template's root is one level; the block's first call another.
	body := "[[ block r(n=0) ]][[ if n > 0 ]][[ yield r(n=n-1) ]][[ end ]][[ end ]][[ yield r(n=Data.n) ]]"
	render := func(n int) error {
		_, err := Render("{{ jet(lookup('data.t')) }}", Scope{Data: map[string]any{"t": body, "n": n}})
		return err
	}
	// The root, the block's in-place definition (n=false: no yield), then
	// n+1 nested calls: MaxNesting levels for n = MaxNesting-2.
	require.NoError(t, render(MaxNesting-2))
	require.ErrorIs(t, render(MaxNesting-1), ErrLimit)
}

func TestJetOutputIsBoundedWhileWriting(t *testing.T) {
	t.Parallel()
	// 2^40 bytes if nothing stopped it.
	in := "{{ jet('[[ block r(n=0) ]][[ if n > 0 ]][[ yield r(n=n-1) ]][[ yield r(n=n-1) ]][[ else ]]" + strings.Repeat("x", 1024) + "[[ end ]][[ end ]][[ yield r(n=40) ]]') }}"
	start := time.Now()
	_, err := Render(in, Scope{})
	require.ErrorIs(t, err, ErrLimit)
	require.ErrorIs(t, err, ErrFileTooLarge)
	require.Less(t, time.Since(start), 5*time.Second)

	exact := fmt.Sprintf("{{ jet('[[ range i := Data.l ]]x[[ end ]]') }}")
	l := make([]any, MaxFileSize)
	// A million iterations under -race on a loaded machine took longer
	// than the default deadline: this is about the output bound.
	far := time.Now().Add(5 * time.Minute)
	out, err := Render(exact, Scope{Data: map[string]any{"l": l}, Deadline: far})
	require.NoError(t, err)
	require.Len(t, out, MaxFileSize)
	_, err = Render(exact, Scope{Data: map[string]any{"l": append(l, 1)}, Deadline: far})
	require.ErrorIs(t, err, ErrFileTooLarge)
}

// A loop that writes nothing still stops at the deadline.
func TestJetDeadline(t *testing.T) {
	t.Parallel()
	l := make([]any, 3000)
	in := "{{ jet('[[ range Data.l ]][[ range Data.l ]][[ range Data.l ]][[ end ]][[ end ]][[ end ]]') }}"
	start := time.Now()
	_, err := Render(in, Scope{Data: map[string]any{"l": l}, Deadline: time.Now().Add(200 * time.Millisecond)})
	require.ErrorIs(t, err, ErrLimit)
	require.ErrorContains(t, err, "took longer than")
	require.Less(t, time.Since(start), 3*time.Second)
}

// resources_jet_file and jet('x.jet') files are bounded the same way.
func TestJetFileRecursionIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "r.jet"), []byte("line 1\n[[ block r() ]][[ yield r() ]][[ end ]]\n"), 0o644))
	_, err := RenderJetFile("r.jet", Scope{Dir: dir})
	require.ErrorIs(t, err, ErrLimit)
	require.ErrorContains(t, err, "r.jet")
	_, err = Render("{{ jet('r.jet') }}", Scope{Dir: dir})
	require.ErrorIs(t, err, ErrLimit)
}

func TestExprStringGrowthIsBounded(t *testing.T) {
	t.Parallel()
	// Doubling a string 40 times exhausted the heap (a fatal error).
	_, err := Render("{{ reduce(1..40, #acc + #acc, 'x') }}", Scope{})
	require.ErrorIs(t, err, ErrLimit)
	// At the limit: MaxOutput bytes pass.
	half := strings.Repeat("x", MaxOutput/2)
	out, err := Render("{{ Data.h + Data.h }}", Scope{Data: map[string]any{"h": half}})
	require.NoError(t, err)
	require.Len(t, out, MaxOutput)
	_, err = Render("{{ Data.h + Data.h + 'x' }}", Scope{Data: map[string]any{"h": half}})
	require.ErrorIs(t, err, ErrLimit)
	// + keeps its meaning for numbers and strings.
	out, err = Render("{{ 1 + 2 }} {{ 'a' + 'b' }} {{ 1.5 + 1 }}", Scope{})
	require.NoError(t, err)
	require.Equal(t, "3 ab 2.5", out)
}

func TestExprNestingIsBounded(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return "{{ " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n) + " }}" }
	require.NoError(t, Check(deep(MaxExprNesting)))
	err := Check(deep(MaxExprNesting + 1))
	require.ErrorIs(t, err, ErrLimit)
	_, err = Render(deep(500_000), Scope{})
	require.ErrorIs(t, err, ErrLimit)
	var ee *ExprError
	require.True(t, errors.As(err, &ee))
}

func TestExprLoopsAreBounded(t *testing.T) {
	t.Parallel()
	_, err := Render("{{ map(1..100000, map(1..100000, 1)) }}", Scope{})
	require.ErrorContains(t, err, "memory budget exceeded")
}

// template() calling itself through data fans out; the deadline stops it.
func TestTemplateFanOutDeadline(t *testing.T) {
	t.Parallel()
	self := "{{ map(1..50, template(lookup('data.t'))) }}"
	start := time.Now()
	_, err := Render(self, Scope{Data: map[string]any{"t": self}, Deadline: time.Now().Add(300 * time.Millisecond)})
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
}

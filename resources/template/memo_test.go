package template

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Over a reusable scope an expression is evaluated once: the next renders
// of it (in other texts too) take its remembered value, and render what
// the plain scope renders. Values callers could modify (maps, lists) and
// errors are not remembered; past MaxMemoized expressions the others are
// evaluated each time.
func TestReusableScopeMemo(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "motd"), []byte("hi"), 0o644))
	reads := 0
	scope := Scope{Data: map[string]any{"greeting": "hello", "n": 2, "m": map[string]any{"k": "v"}}, Dir: dir,
		OnRead: func(string, []byte) error { reads++; return nil }}
	reused := scope.Reusable()
	memo := reused.memo()
	require.NotNil(t, memo)

	for i := range 100 {
		in := fmt.Sprintf("{{ lookup('data.greeting') }} from file %d {{ data.n + 1 }} {{ file('motd') }}", i)
		want, err := Render(in, scope)
		require.NoError(t, err)
		got, err := Render(in, reused)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	require.Equal(t, 3, memo.memoized())
	require.Equal(t, 100+1, reads, "the plain scope reads the file at each render, the reusable one once")

	v, err := Render("{{ data.m }}", reused)
	require.NoError(t, err)
	v.(map[string]any)["k"] = "changed"
	v, err = Render("{{ data.m }}", reused)
	require.NoError(t, err)
	require.Equal(t, "changed", v.(map[string]any)["k"], "a map is the data's own, evaluated each time")
	_, err = Render("{{ lookup('data.nope') }}", reused)
	require.Error(t, err)
	require.Equal(t, 3, memo.memoized(), "maps and errors are not remembered")

	// A nested scope (another depth) has no memo.
	require.Nil(t, Scope{Data: scope.Data}.memo())

	// At the limit.
	for i := memo.memoized(); i < MaxMemoized+10; i++ {
		_, err := Render(fmt.Sprintf("{{ %d }}", i), reused)
		require.NoError(t, err)
	}
	require.Equal(t, MaxMemoized, memo.memoized())
	v, err = Render(fmt.Sprintf("{{ %d }}", MaxMemoized+5), reused)
	require.NoError(t, err)
	require.Equal(t, MaxMemoized+5, v, "past the limit, expressions are still evaluated")

	plain := testing.AllocsPerRun(50, func() { _, _ = Render("{{ lookup('data.greeting') }} x", scope) })
	memoized := testing.AllocsPerRun(50, func() { _, _ = Render("{{ lookup('data.greeting') }} x", reused) })
	t.Logf("allocations per Render: plain %.0f, reusable with memo %.0f", plain, memoized)
	require.LessOrEqual(t, memoized, 6.0)
}

package template

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A reusable scope renders what the scope renders, nested template()
// calls included (their depth still bounded), with the environment made
// once rather than at every Render.
func TestReusableScope(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "self.templ"), []byte("{{ template('self.templ') }}"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "motd.templ"), []byte("hi {{ lookup('data.who') }}"), 0o644))
	scope := Scope{Data: map[string]any{"who": "you", "n": 2}, Facts: map[string]any{"os": "linux"}, Dir: dir}
	reused := scope.Reusable()
	for _, in := range []string{
		"plain", "{{ lookup('data.who') }}", "{{ data.n + 1 }}", "{{ facts.os }} and {{ Data.who }}",
		"{{ template('motd.templ') }}", "{{ lookup('data.nope', 'dflt') }}",
	} {
		want, err := Render(in, scope)
		require.NoError(t, err, in)
		got, err := Render(in, reused)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := Render("{{ lookup('data.nope') }}", reused)
	var missing *MissingKeyError
	require.True(t, errors.As(err, &missing), "%v", err)
	_, err = Render("{{ template('self.templ') }}", reused)
	require.ErrorIs(t, err, ErrDepthExceeded)

	plain := testing.AllocsPerRun(50, func() { _, _ = Render("{{ lookup('data.who') }} x", scope) })
	reuse := testing.AllocsPerRun(50, func() { _, _ = Render("{{ lookup('data.who') }} x", reused) })
	t.Logf("allocations per Render: %.0f, reused %.0f", plain, reuse)
	require.Less(t, reuse, plain-10)
}

package template

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

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

// Rearm gives a reusable scope's next evaluation a budget of its own: an
// evaluation that spent the budget (its deadline passed) fails, the next
// after Rearm renders, over the same environment and remembered values; a
// scope Reusable did not make is returned as it is.
func TestRearmGivesEachEvaluationItsBudget(t *testing.T) {
	reused := Scope{Data: map[string]any{"who": "you"}}.Reusable()
	got, err := Render("{{ lookup('data.who') }}!", reused)
	require.NoError(t, err)
	require.Equal(t, "you!", got)
	env, memoized := reused.envFor(), reused.memo().memoized()
	require.Equal(t, 1, memoized)

	reused.budget.deadline = time.Now().Add(-time.Second) // the evaluation ran out of time
	_, err = Render("{{ data.who + '?' }}", reused)
	require.ErrorIs(t, err, ErrLimit)

	again := reused.Rearm()
	got, err = Render("{{ data.who + '?' }}", again)
	require.NoError(t, err)
	require.Equal(t, "you?", got)
	require.True(t, again.budget.deadline.After(time.Now().Add(RenderTimeout-time.Minute)), "deadline %v", again.budget.deadline)
	require.Equal(t, reflect.ValueOf(env).UnsafePointer(), reflect.ValueOf(again.envFor()).UnsafePointer(), "the environment is kept")
	require.Equal(t, 2, again.memo().memoized(), "the remembered values are kept")

	plain := Scope{Data: map[string]any{"who": "you"}}
	require.Nil(t, plain.Rearm().budget)
	withDeadline := Scope{Deadline: time.Now().Add(time.Hour)}.Reusable()
	withDeadline.budget.depth = 3
	require.Equal(t, 0, withDeadline.Rearm().budget.depth)
	require.Equal(t, withDeadline.Deadline, withDeadline.Rearm().budget.deadline)
}

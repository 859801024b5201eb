package facts

import (
	"errors"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A FIFO among the facts files (no writer: opening it for reading would
// block forever) is skipped with a warning naming it; the other files are
// read, and reading ends at once.
func TestFromDirSkipsFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "facts.d", "10-role.json"), `{"role": "web"}`)
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "facts.d", "20-pipe.json"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "facts.yaml"), 0o644))

	var mu sync.Mutex
	var warnings []error
	type result struct {
		facts map[string]any
		err   error
	}
	done := make(chan result, 1)
	go func() {
		f, err := Gather(t.Context(), Opts{Dir: dir, NoSystem: true, Warn: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			warnings = append(warnings, err)
		}})
		done <- result{f, err}
	}()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Equal(t, map[string]any{"role": "web"}, r.facts)
	case <-time.After(10 * time.Second):
		t.Fatal("reading a facts directory holding a FIFO did not finish")
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, warnings, 2)
	for _, w := range warnings {
		require.True(t, errors.Is(w, ErrNotRegular), "%v", w)
		require.Contains(t, w.Error(), "is a FIFO; skipped")
	}
	require.Contains(t, warnings[0].Error(), filepath.Join(dir, "facts.yaml"))
	require.Contains(t, warnings[1].Error(), filepath.Join(dir, "facts.d", "20-pipe.json"))
}

// A facts directory this user may not search is an error when named, and
// a warning when it is the default (Optional).
func TestFromDirUnreadable(t *testing.T) {
	t.Parallel()
	if syscall.Geteuid() == 0 {
		t.Skip("root reads any directory; internal/cli TestUnreadableDefaultFactsDir runs this as nobody")
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "m", "facts.d", "10-role.json"), `{"role": "web"}`)
	require.NoError(t, syscall.Chmod(filepath.Join(dir, "m"), 0o000))
	t.Cleanup(func() { _ = syscall.Chmod(filepath.Join(dir, "m"), 0o755) })
	_, err := FromDir(filepath.Join(dir, "m"))
	require.ErrorContains(t, err, "permission denied")
	var warned []error
	f, err := FromDirOpts(filepath.Join(dir, "m"), DirOpts{Optional: true, Warn: func(err error) { warned = append(warned, err) }})
	require.NoError(t, err)
	require.Empty(t, f)
	require.Len(t, warned, 1)
	require.ErrorContains(t, warned[0], "permission denied")
}

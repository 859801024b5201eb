package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A crash is never exit 2 (invalid input): a panic in a command exits 3
// with the stack; the recursive template that crashed every process is an
// invalid manifest, exit 2, with a clear error.
func TestCrashIsNeverExitInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := filepath.Join(dir, "m.yaml")
	require.NoError(t, os.WriteFile(m, []byte("resources:\n  - file:\n      - /tmp/x:\n          content: \"{{ jet('[[ block r() ]][[ yield r() ]][[ end ]]') }}\"\n"), 0o644))

	var out, errOut bytes.Buffer
	st := IO{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	code := Run(context.Background(), st, []string{"validate", "--facts-dir", dir, m})
	require.Equal(t, ExitInvalid, code, errOut.String())
	require.Contains(t, errOut.String(), "m.yaml:3:9: resources[0].file[0]")
	require.Contains(t, errOut.String(), "nested more than 1000 deep")

	errOut.Reset()
	ok := filepath.Join(dir, "ok.yaml")
	require.NoError(t, os.WriteFile(ok, []byte("resources: []\n"), 0o644))
	st.Stdout = panicWriter{}
	code = Run(context.Background(), st, []string{"validate", "--facts-dir", dir, ok})
	require.Equal(t, ExitUnavailable, code, errOut.String())
	require.Contains(t, errOut.String(), "internal error")
	require.Contains(t, errOut.String(), "boom")
}

// panicWriter stands for a bug: it panics when written to.
type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("boom") }

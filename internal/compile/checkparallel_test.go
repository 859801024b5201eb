package compile

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/schemas"
)

// propertiesManifest is a manifest of n files whose content is
// templated from data, the ones at bad given a mode from data that is
// invalid once rendered (the schema takes a template as a mode).
func propertiesManifest(n int, bad []int) string {
	var b strings.Builder
	b.WriteString("data:\n  greeting: hello\n  mode: \"0999\"\nresources:\n")
	for i := range n {
		mode, content := "0644", "{{ lookup('data.greeting') }} "+fmt.Sprint(i)
		for _, j := range bad {
			if i == j {
				mode = "{{ lookup('data.mode') }}"
			}
		}
		fmt.Fprintf(&b, "  - {type: file, name: /tmp/props/f%d, mode: %q, content: %q}\n", i, mode, content)
	}
	return b.String()
}

// TestPropertyChecksSideBySideAreOneByOne: a manifest's properties are
// checked on several goroutines (at least minPropertyChecks resources
// each), and the errors are those of checking one resource after another,
// in the same order, naming file, line and field.
func TestPropertyChecksSideBySideAreOneByOne(t *testing.T) {
	t.Parallel()
	n := 4 * minPropertyChecks
	bad := []int{3, n/2 - 1, n / 2, n - 1}
	src := propertiesManifest(n, bad)
	_, err := Source("m.yaml", []byte(src), Opts{})
	require.Error(t, err)
	got := errLines(t, err)
	require.Len(t, got, len(bad), "%s", strings.Join(got, "\n"))

	m, err := schemas.ParseUnchecked("m.yaml", []byte(src))
	require.NoError(t, err)
	data, _, err := Opts{}.data(m)
	require.NoError(t, err)
	var want []string
	for _, e := range checkPropertiesOf(m.Resources, Opts{}.scope(data).Reusable(), needsWorker) {
		want = append(want, e.Error())
	}
	require.Equal(t, want, got)
	for k, i := range bad {
		require.Contains(t, got[k], fmt.Sprintf("m.yaml:%d:", i+5), "error %d names the resource's line", k)
		require.Contains(t, got[k], fmt.Sprintf("resources[%d]", i))
	}
}

// TestPropertyChecksThatReadFilesStayInOrder: when a template may read a
// file, the properties are checked one after another, so the files reach
// OnRead (and the bundle) in the order of the resources.
func TestPropertyChecksThatReadFilesStayInOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := 4 * minPropertyChecks
	var b strings.Builder
	b.WriteString("resources:\n")
	var want []string
	for i := range n {
		name := fmt.Sprintf("c%d.txt", i)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(fmt.Sprint(i)), 0o644))
		fmt.Fprintf(&b, "  - {type: file, name: /tmp/props/f%d, content: \"{{ file('%s') }}\"}\n", i, name)
		want = append(want, name)
	}
	var read []string
	p, err := Source("m.yaml", []byte(b.String()), Opts{Dir: dir, OnRead: func(name string, _ []byte) error {
		read = append(read, name) // no lock: a second goroutine reading would be a race
		return nil
	}})
	require.NoError(t, err)
	require.Len(t, p.Manifest.Resources, n)
	// Each file is read when the bundle is made (its literal name), then
	// when the properties are checked: that second time in order too.
	require.Len(t, read, 2*n)
	require.True(t, slices.Equal(want, read[n:]), "the property checks read the files out of order")
}

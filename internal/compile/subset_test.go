package compile

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSubsetKeepsTheDriftedAndWhatTheyRefresh(t *testing.T) {
	t.Parallel()
	const src = `
resources:
  - file:
      - /tmp/a.conf: {content: a}
      - /tmp/b.conf: {content: b, require: [file#/tmp/a.conf]}
      - /tmp/c.conf: {content: c}
  - exec:
      - reload-b:
          command: /bin/true
          refreshonly: true
          subscribe: [file#/tmp/b.conf]
          require: [file#/tmp/c.conf]
      - notify:
          command: /bin/true
          refreshonly: true
          subscribe: [exec#reload-b]
      - other:
          command: /bin/true
          refreshonly: true
          subscribe: [file#/tmp/c.conf]
`
	p, err := compileSrc(t, "site.yaml", src, Opts{})
	require.NoError(t, err)
	sp, err := Subset(p, []string{"file#/tmp/b.conf"})
	require.NoError(t, err)
	var refs []string
	for _, r := range sp.Manifest.Resources {
		refs = append(refs, r.Ref())
	}
	// b drifted: reload-b subscribes to it, notify to reload-b; a, c and
	// other are left out.
	require.Equal(t, []string{"file#/tmp/b.conf", "exec#reload-b", "exec#notify"}, refs)
	// Edges to the left-out resources are gone; those among the subset stay.
	require.Empty(t, sp.Manifest.Resources[0].Require)
	require.Empty(t, sp.Requires[0])
	require.Equal(t, [][]int{nil, {0}, {1}}, sp.Subscribes)
	require.Empty(t, sp.Manifest.Resources[1].Require)
	// Manifest order is a chain among the subset.
	require.Equal(t, []int{-1, 0, 1}, sp.After)
	// The original plan is untouched.
	require.Len(t, p.Manifest.Resources, 6)
	require.Equal(t, []string{"file#/tmp/a.conf"}, p.Manifest.Resources[1].Require)

	_, err = Subset(p, []string{"file#/nope"})
	require.ErrorContains(t, err, "file#/nope: no such resource")
}

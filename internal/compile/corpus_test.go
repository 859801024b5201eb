package compile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// corpusCase is one documented outcome of a corpus manifest.
type corpusCase struct {
	// Facts are the host's facts.
	Facts map[string]any `yaml:"facts"`
	// Resources are the references the manifest compiles to, in order.
	Resources []string `yaml:"resources"`
	// Properties are some properties of some resources, by reference.
	Properties map[string]map[string]any `yaml:"properties"`
	// Pre and Post are the rendered messages.
	Pre  string `yaml:"pre"`
	Post string `yaml:"post"`
	// FailOnError is the manifest's fail_on_error.
	FailOnError bool `yaml:"fail_on_error"`
	// Error is a substring of the compilation error, when it must fail.
	Error string `yaml:"error"`
}

// TestCCMCorpus compiles the CCM-format manifests of testdata/ccm (taken
// from CCM's documentation and tests) with the facts of each documented
// case and checks the outcome: the resources, their properties, the
// messages, or the error.
func TestCCMCorpus(t *testing.T) {
	t.Parallel()
	dirs, err := filepath.Glob("testdata/ccm/*")
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(filepath.Join(dir, "expect.yaml"))
			require.NoError(t, err)
			var expect struct {
				Cases []corpusCase `yaml:"cases"`
			}
			require.NoError(t, yaml.Unmarshal(raw, &expect))
			require.NotEmpty(t, expect.Cases)
			for _, c := range expect.Cases {
				tr, err := Build(filepath.Join(dir, "manifest.yaml"), Opts{Facts: c.Facts})
				if c.Error != "" {
					require.ErrorContains(t, err, c.Error)
					continue
				}
				require.NoError(t, err, "facts %v", c.Facts)
				p := tr.Plan
				require.Equal(t, c.Resources, refs(p), "facts %v", c.Facts)
				for ref, props := range c.Properties {
					i, ok := p.Manifest.Lookup(ref)
					require.True(t, ok, ref)
					for k, v := range props {
						require.Equal(t, v, p.Manifest.Resources[i].Properties[k], "%s.%s", ref, k)
					}
				}
				require.Equal(t, c.Pre, p.PreMessage)
				require.Equal(t, c.Post, p.PostMessage)
				require.Equal(t, c.FailOnError, p.Manifest.FailOnError)
			}
		})
	}
}

// The examples compile: the Jet one with and without the prod fact, the
// CUE one with its comprehension.
func TestExamples(t *testing.T) {
	t.Parallel()
	tr, err := Build("../../examples/jet/manifest.yaml", Opts{Facts: map[string]any{"env": "prod"}})
	require.NoError(t, err)
	require.Equal(t, []string{"file#/tmp/manifold-jet", "file#/tmp/manifold-jet/www.conf", "file#/tmp/manifold-jet/api.conf",
		"file#/tmp/manifold-jet/admin.conf"}, refs(tr.Plan))
	require.Equal(t, "sites: www, api, admin", tr.Plan.PreMessage)
	require.Equal(t, []string{"manifest.yaml", "resources.jet", "site.templ"}, tr.Bundle.Names())
	tr, err = Build("../../examples/jet/manifest.yaml", Opts{})
	require.NoError(t, err)
	require.Len(t, tr.Plan.Manifest.Resources, 2)

	tr, err = Build("../../examples/cue/manifest.cue", Opts{})
	require.NoError(t, err)
	require.Equal(t, []string{"file#/tmp/manifold-cue", "file#/tmp/manifold-cue/www.conf", "file#/tmp/manifold-cue/api.conf",
		"file#/tmp/manifold-cue/admin.conf"}, refs(tr.Plan))
	require.Equal(t, []int{0}, tr.Plan.Requires[3])
}

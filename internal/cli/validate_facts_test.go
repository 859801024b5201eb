package cli

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// validate, render and the embedded apply (without --hiera) gather
// facts while the manifest is parsed; what
// they print is what they printed when facts came first: a facts error
// alone (not the manifest's problems as well), else the manifest's
// problems, and facts reach the templates.
func TestValidateGathersFactsWhileParsing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"bad.yaml":            "resources:\n  - file:\n      - /tmp/x: {mdoe: \"0644\"}\n",
		"facts.yaml":          "resources:\n  - file:\n      - /tmp/x: {content: \"{{ lookup('facts.zone') }}\"}\n",
		"good.yaml":           "resources:\n  - file:\n      - /tmp/x: {content: x}\n",
		"badfacts/facts.yaml": "a: [\n",
	})
	badFacts := filepath.Join(dir, "badfacts")
	for _, cmd := range []string{"validate", "render", "apply"} {
		for _, m := range []string{"bad.yaml", "good.yaml", "absent.yaml"} {
			r := run(t, cmd, "--facts-dir", badFacts, filepath.Join(dir, m))
			require.Equal(t, ExitInvalid, r.code, "%s %s: %+v", cmd, m, r)
			require.Empty(t, r.stdout, "%s %s", cmd, m)
			require.Regexp(t, `^manifold `+cmd+`: facts: bad facts file: [^\n]*badfacts/facts.yaml[^\n]*\n$`, r.stderr, "%s %s: the facts error alone", cmd, m)
		}
		r := run(t, cmd, "--facts-dir", dir, filepath.Join(dir, "bad.yaml"))
		require.Equal(t, ExitInvalid, r.code)
		require.Contains(t, r.stderr, `bad.yaml:3:18: resources[0].file[0]./tmp/x.mdoe: field not allowed (did you mean "mode"?)`)
	}
	r := run(t, "render", "--facts-dir", dir, "--fact", "zone=b", filepath.Join(dir, "facts.yaml"))
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"content": "{{ lookup('facts.zone') }}"`)
	r = run(t, "validate", "--facts-dir", dir, "--fact", "zone=b", filepath.Join(dir, "facts.yaml"))
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, filepath.Join(dir, "facts.yaml")+": valid, 1 resource\n", r.stdout)
}

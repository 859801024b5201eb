package schemas_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/schemas"
)

// TestRegisterWhenStableCCMExamples: CCM's two documentation examples of
// registration validate once their errors are fixed (the same errors
// CCM's own parser trips on: a block that is a map, not a list; and keys
// CCM ignores silently); verbatim they are refused at the line of the
// first error.
func TestRegisterWhenStableCCMExamples(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "ccm_registration")
	for _, name := range []string{"web_nginx", "web_node", "lb_node"} {
		src, err := os.ReadFile(filepath.Join(dir, name+".fixed.yaml"))
		require.NoError(t, err)
		m, err := schemas.Parse(name+".yaml", src)
		require.NoError(t, err, name)
		if name == "lb_node" {
			continue
		}
		r := m.Resources[0]
		require.Len(t, r.RegisterWhenStable, 1, name)
		reg := r.RegisterWhenStable[0]
		require.Equal(t, "production", reg["cluster"])
		require.Equal(t, "{{ Facts.network.primaryIP }}", reg["address"], "templates are kept for the worker")
		require.Equal(t, "10m", reg["ttl"])
		require.Nil(t, r.Properties["register_when_stable"], "a common property, not the type's")

		verbatim, err := os.ReadFile(filepath.Join(dir, name+".yaml"))
		require.NoError(t, err)
		_, err = schemas.Parse(name+".yaml", verbatim)
		require.ErrorContains(t, err, name+".yaml:")
	}
}

// TestRegisterWhenStableErrors: each field's rule is checked before
// anything runs, at file:line, naming the field.
func TestRegisterWhenStableErrors(t *testing.T) {
	t.Parallel()
	src := `resources:
  - file:
      - /tmp/a:
          content: x
          register_when_stable:
            - cluster: 1prod
              service: web
              protocol: http
              address: 10.0.0.1
              port: 70000
              priority: 0
              ttl: 10m
              colour: blue
            - cluster: prod
              service: web
              protocol: http
              priority: 256
`
	_, err := schemas.Parse("site.yaml", []byte(src))
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		`site.yaml:6:24: resources[0].file[0]./tmp/a.register_when_stable[0].cluster: invalid value "1prod" (allowed: =~"^[a-zA-Z][a-zA-Z0-9_-]{0,127}$" | #Template)`,
		"site.yaml:10:21: resources[0].file[0]./tmp/a.register_when_stable[0].port: invalid value 70000 (allowed: (int & >=1 & <=65535) | #Template)",
		"site.yaml:11:25: resources[0].file[0]./tmp/a.register_when_stable[0].priority: invalid value 0",
		"site.yaml:17:25: resources[0].file[0]./tmp/a.register_when_stable[1].priority: invalid value 256",
	} {
		require.Contains(t, msg, want)
	}
	// An unknown key.
	_, err = schemas.Parse("site.yaml", []byte("resources:\n  - {type: file, name: /tmp/a, register_when_stable: [{cluster: c, service: s, protocol: p, address: a, priority: 1, colour: blue}]}\n"))
	require.ErrorContains(t, err, "site.yaml:2:118: resources[0].register_when_stable[0].colour: field not allowed")
	// A required field missing.
	_, err = schemas.Parse("site.yaml", []byte("resources:\n  - {type: file, name: /tmp/a, register_when_stable: [{cluster: c, service: s, protocol: p, priority: 1}]}\n"))
	require.ErrorContains(t, err, "register_when_stable[0].address: field is required but not present")
	// At the limits, and with templates, it validates.
	ok := strings.NewReplacer("1prod", "prod", "70000", "65535", "priority: 0", "priority: 255", "colour: blue", "annotations: {a: b}",
		"priority: 256", "priority: \"{{ Data.prio }}\"\n              address: \"{{ Facts.ip }}\"").Replace(src)
	_, err = schemas.Parse("site.yaml", []byte(ok))
	require.NoError(t, err)
}

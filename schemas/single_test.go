package schemas

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// CCM's resources page writes a type key holding one map with the name
// among its properties: it declares one resource, like the block and flat
// shapes, with the same checks and defaults.
func TestSingleResourceShape(t *testing.T) {
	t.Parallel()
	m, err := Parse("ccm.yaml", []byte(`defaults:
  package: {provider: apt}
resources:
  - package: {name: sl, ensure: "5.9"}
  - package:
      name: cowsay
      ensure: absent
  - package:
      - jq: {}
  - file:
      name: /tmp/x
      content: x
`))
	require.NoError(t, err)
	require.Len(t, m.Resources, 4)
	sl := m.Resources[0]
	require.Equal(t, "package", sl.Type)
	require.Equal(t, "sl", sl.Name)
	require.Equal(t, "5.9", sl.Ensure)
	require.Equal(t, "apt", sl.Provider, "manifest defaults apply")
	require.Equal(t, "resources[0].package", sl.Path)
	require.Equal(t, Position{File: "ccm.yaml", Line: 4, Column: 5}, sl.Pos)
	require.Equal(t, "cowsay", m.Resources[1].Name)
	require.Equal(t, "absent", m.Resources[1].Ensure)
	require.Equal(t, "jq", m.Resources[2].Name)
	require.Equal(t, "present", m.Resources[2].Ensure)
	require.Equal(t, Resource{Type: "file", Name: "/tmp/x", Ensure: "present", Properties: map[string]any{"content": "x"},
		Pos: m.Resources[3].Pos, Path: "resources[3].file"}, m.Resources[3])

	// The block shape's {NAME: {...}} map without a list, and a bad
	// property: errors with their positions.
	_, err = Parse("bad.yaml", []byte(`resources:
  - package: {sl: {ensure: present}}
  - package: {name: sl, ensure: "1.0 && reboot"}
  - package: {name: sl, ensrue: present}
`))
	require.Error(t, err)
	require.ErrorContains(t, err, `bad.yaml:2:5: resources[0].package: a single package resource is a map with its name: {package: {name: NAME, ...}}; several are a list of {NAME: {properties}} entries; got keys "sl"`)
	require.ErrorContains(t, err, `bad.yaml:3:33: resources[1].package.ensure`)
	require.ErrorContains(t, err, `bad.yaml:4:25: resources[2].package.ensrue: field not allowed (did you mean "ensure"?)`)
}

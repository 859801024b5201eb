package compile

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// perHostSrc is a fleet manifest: a file per host named and filled from
// the host's facts through a hierarchy keyed on them.
const perHostSrc = `
hierarchy:
  order: ["node:{{ lookup('facts.node') }}"]
data:
  mode: "0644"
overrides:
  node:n1: {content: one}
  node:n2: {content: two}
resources:
  - file:
      - "/etc/app/{{ lookup('facts.node') }}.conf":
          content: "{{ lookup('data.content') }}"
          mode: "{{ lookup('data.mode') }}"
      - /etc/app/index:
          content: index
          require: [%s]
`

func perHost(ref string) string { return sprintf(perHostSrc, ref) }

// TestPerHostCentralCheck: compiled centrally for a per-host run, what
// needs a host's facts is left to the host and everything else is still
// checked; compiled for one host, its facts render names and data, and a
// template its facts make fail is an error naming file, line and field.
func TestPerHostCentralCheck(t *testing.T) {
	t.Parallel()
	ok := perHost(`"file#/etc/app/n1.conf"`)

	// Not per host: refused as before.
	_, err := compileSrc(t, "site.yaml", ok, Opts{})
	require.ErrorIs(t, err, ErrFactInName)

	// Centrally: accepted; the fact-dependent name is left as written.
	p, err := compileSrc(t, "site.yaml", ok, Opts{PerHost: true, Facts: map[string]any{"node": "n9"}})
	require.NoError(t, err)
	require.Equal(t, "/etc/app/{{ lookup('facts.node') }}.conf", p.Manifest.Resources[0].Name)
	require.Equal(t, map[string]any{"mode": "0644"}, p.Data, "data a fact-keyed hierarchy sets is the hosts'; --fact is not used")

	for _, tc := range []struct{ name, src, want string }{
		{"a reference no host can resolve", perHost(`"file#/etc/other.conf"`),
			"site.yaml:14:9: resources[0].file[1]./etc/app/index.require[0]: require file#/etc/other.conf: unknown resource"},
		{"template syntax", `
hierarchy: {order: ["node:{{ lookup('facts.node') }}"]}
resources:
  - file:
      - "/etc/app/{{ lookup('facts.node') }}.conf": {content: "{{ data.content "}
`, "site.yaml:5:9: resources[0].file[0]./etc/app/{{ lookup('facts.node') }}.conf.content: template"},
		{"a data key no hierarchy sets", `
hierarchy: {order: ["node:{{ lookup('facts.node') }}"]}
overrides: {node:n1: {content: one}}
resources:
  - file:
      - "/etc/app/{{ lookup('facts.node') }}.conf": {content: "{{ lookup('data.contnet') }}"}
`, `site.yaml:6:9: resources[0].file[0]./etc/app/{{ lookup('facts.node') }}.conf: file#/etc/app/{{ lookup('facts.node') }}.conf: content: lookup "data.contnet": key not found`},
		{"a bad literal property", `
hierarchy: {order: ["node:{{ lookup('facts.node') }}"]}
resources:
  - file:
      - "/etc/app/{{ lookup('facts.node') }}.conf": {content: x, mode: "bogus"}
`, `site.yaml:5:72: resources[0].file[0]./etc/app/{{ lookup('facts.node') }}.conf.mode: invalid value "bogus"`},
		{"an apply named by facts", `
resources:
  - apply:
      - "{{ lookup('facts.node') }}.yaml": {}
`, "an apply resource's name is rendered from data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compileSrc(t, "site.yaml", tc.src, Opts{PerHost: true})
			require.Error(t, err)
			require.Contains(t, joinLines(errLines(t, err)), tc.want)
		})
	}
	_, err = compileSrc(t, "site.yaml", `
hierarchy: {order: ["node:{{ lookup('facts.node') }}"]}
overrides: {node:n1: {content: one}}
resources:
  - file:
      - "/etc/app/{{ lookup('facts.node') }}.conf": {content: "{{ lookup('data.contnet') }}"}
`, Opts{PerHost: true})
	require.NotContains(t, err.Error(), "data.content", "only the misspelt key is reported")

	// For each host: its facts.
	for node, content := range map[string]string{"n1": "one", "n2": "two"} {
		p, err := compileSrc(t, "site.yaml", ok, Opts{HostFacts: true, Facts: map[string]any{"node": node}})
		if node == "n2" {
			require.Error(t, err, "n2 has no file#/etc/app/n1.conf")
			require.Contains(t, err.Error(), "site.yaml:14:9: resources[0].file[1]./etc/app/index.require[0]: require file#/etc/app/n1.conf: unknown resource")
			continue
		}
		require.NoError(t, err)
		require.Equal(t, "/etc/app/"+node+".conf", p.Manifest.Resources[0].Name)
		require.Equal(t, content, p.Data["content"])
	}
	noRef := perHost("")
	_, err = compileSrc(t, "site.yaml", noRef, Opts{HostFacts: true, Facts: map[string]any{"node": "n3"}})
	require.Error(t, err, "n3 has no override: data.content is missing for it")
	require.Contains(t, err.Error(), "site.yaml:11:9: resources[0]")
	require.Contains(t, err.Error(), `lookup "data.content": key not found`)

	_, err = compileSrc(t, "site.yaml", noRef, Opts{HostFacts: true, Facts: map[string]any{"os": "debian"}})
	require.Error(t, err, "a host without the fact")
	require.Contains(t, err.Error(), "site.yaml:11:9: resources[0].file[0]./etc/app/{{ lookup('facts.node') }}.conf.name: file#/etc/app/{{ lookup('facts.node') }}.conf: lookup \"facts.node\": key not found")
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

func joinLines(lines []string) string { return strings.Join(lines, "\n") }

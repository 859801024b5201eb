package compile

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCycles: resources that wait for each other are a validation error
// at the first declared one, naming the chain, whatever the edges: a run
// of them would never end. A self-require and a require of a later
// resource under ordering: manifest have their own, earlier errors.
func TestCycles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"two", `
ordering: graph
resources:
  - file:
      - /a: {content: x, require: ["exec#b"]}
  - exec:
      - b: {command: "true", require: ["file#/a"]}
`, []string{"m.yaml:5:9: compile: dependency cycle: file#/a -> exec#b -> file#/a"}},
		{"three", `
ordering: graph
resources:
  - exec:
      - c: {command: "true", require: ["exec#a"]}
      - a: {command: "true", require: ["exec#b"]}
      - b: {command: "true", require: ["exec#c"]}
`, []string{"m.yaml:5:9: compile: dependency cycle: exec#c -> exec#a -> exec#b -> exec#c"}},
		{"self", `
ordering: graph
resources:
  - exec:
      - ok: {command: "true"}
      - a: {command: "true", require: ["exec#a"]}
`, []string{"m.yaml:6:9: resources[0].exec[1].a.require[0]: require exec#a: a resource cannot require itself"}},
		{"subscribe", `
ordering: graph
resources:
  - file:
      - /etc/app.conf: {content: x, require: ["service#app"]}
  - service:
      - app: {ensure: running, subscribe: ["file#/etc/app.conf"]}
`, []string{"m.yaml:5:9: compile: dependency cycle: file#/etc/app.conf -> service#app -> file#/etc/app.conf"}},
		{"declaration order", `
resources:
  - exec:
      - a: {command: "true", require: ["exec#b"]}
      - b: {command: "true"}
`, []string{"m.yaml:4:9: resources[0].exec[0].a.require[0]: require exec#b points to a later resource"}},
		{"two cycles", `
ordering: graph
resources:
  - exec:
      - a: {command: "true", require: ["exec#b"]}
      - b: {command: "true", require: ["exec#a"]}
      - c: {command: "true", require: ["exec#a", "exec#d"]}
      - d: {command: "true", subscribe: ["exec#c"]}
`, []string{
			"m.yaml:5:9: compile: dependency cycle: exec#a -> exec#b -> exec#a",
			"m.yaml:7:9: compile: dependency cycle: exec#c -> exec#d -> exec#c",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := compileSrc(t, "m.yaml", tc.src, Opts{})
			require.Error(t, err)
			lines := errLines(t, err)
			require.Len(t, lines, len(tc.want), "%q", lines)
			for i, w := range tc.want {
				require.Contains(t, lines[i], w)
			}
		})
	}
}

// TestCycleThroughAutomaticEdge: an automatic edge counts as a require in
// the cycle check; one that would close a cycle is not added (AutoSkipped),
// so written edges plus automatic ones never hide a cycle and never make
// one.
func TestCycleThroughAutomaticEdge(t *testing.T) {
	t.Parallel()
	// /srv/app/x requires /srv/app automatically; /srv/app waits for an
	// exec that waits for the file: a cycle only through the automatic edge
	// were it added.
	p, err := compileSrc(t, "m.yaml", `
ordering: graph
resources:
  - file:
      - /srv/app: {ensure: directory, require: ["exec#gen"]}
      - /srv/app/x: {content: x}
  - exec:
      - gen: {command: "true", require: ["file#/srv/app/x"]}
`, Opts{})
	require.NoError(t, err)
	require.Empty(t, p.Manifest.Resources[1].AutoRequire)
	require.Len(t, p.Manifest.Resources[1].AutoSkipped, 1)

	// The automatic edge is in the plan the check reads: with a written
	// require back to its dependent it is a cycle.
	p, err = compileSrc(t, "m.yaml", `
ordering: graph
resources:
  - file:
      - /srv/app: {ensure: directory}
      - /srv/app/x: {content: x}
`, Opts{})
	require.NoError(t, err)
	require.Equal(t, []int{0}, p.Requires[1])
	p.Requires[0] = append(p.Requires[0], 1)
	errs := checkCycles(p)
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Error(), "file#/srv/app -> file#/srv/app/x -> file#/srv/app")
}

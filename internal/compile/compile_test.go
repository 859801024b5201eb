package compile

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/internal/hiera"
	"github.com/manifold-run/manifold/schemas"
)

func compileSrc(t *testing.T, name, src string, o Opts) (*Plan, error) {
	t.Helper()
	return Source(name, []byte(src), o)
}

// errLines returns the error's lines (one per schemas.Error).
func errLines(t *testing.T, err error) []string {
	t.Helper()
	var errs schemas.Errors
	require.ErrorAs(t, err, &errs)
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

func TestDataLayers(t *testing.T) {
	t.Parallel()
	const src = `
hierarchy:
  order: ["os:{{ lookup('facts.os') }}", "env:{{ lookup('facts.env') }}"]
  merge: deep
data:
  app: {name: child, port: 1, tags: [a]}
  motd: "on {{ lookup('facts.os', 'unknown') }}"
overrides:
  os:debian: {app: {port: 2, tags: [deb]}}
  env:prod: {app: {tls: true}}
resources:
  - file:
      - /tmp/x: {content: "port={{ lookup('data.app.port') }}"}
`
	tests := []struct {
		name  string
		o     Opts
		want  map[string]any
		check func(t *testing.T, data map[string]any)
	}{
		{name: "no facts: entries skipped, defaults rendered",
			want: map[string]any{"app": map[string]any{"name": "child", "port": 1, "tags": []any{"a"}}, "motd": "on unknown"}},
		{name: "deep hierarchy over facts",
			o: Opts{Facts: map[string]any{"os": "debian", "env": "prod"}},
			want: map[string]any{"app": map[string]any{"name": "child", "port": 2, "tags": []any{"a", "deb"}, "tls": true},
				"motd": "on debian"}},
		{name: "apply data then run data, deep, run wins",
			o: Opts{Facts: map[string]any{"os": "debian"}, ApplyData: map[string]any{"app": map[string]any{"port": 3, "extra": "x"}},
				Run: map[string]any{"app": map[string]any{"port": 80, "tags": []any{"z"}}}},
			want: map[string]any{"app": map[string]any{"name": "child", "port": 80, "tags": []any{"z"}, "extra": "x"},
				"motd": "on debian"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := compileSrc(t, "m.yaml", src, tt.o)
			require.NoError(t, err)
			require.Equal(t, tt.want, p.Data)
		})
	}
}

// The repro of the shallow-merge bug: a run override of one key of a map
// keeps the map's other keys, so the child's templated name still renders.
func TestRunDataMergesDeepIntoNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml": `
data: {app: {name: child, port: 1}}
resources:
  - apply:
      - "{{ lookup('data.app.name') }}/manifest.yaml": {}
`,
		"child/manifest.yaml": "resources:\n  - file:\n      - /tmp/x: {content: \"port={{ lookup('data.app.port') }}\"}\n",
	})
	tr, err := Build(filepath.Join(dir, "manifest.yaml"), Opts{Run: map[string]any{"app": map[string]any{"port": 80}}})
	require.NoError(t, err)
	require.Equal(t, "child/manifest.yaml", tr.Plan.Manifest.Resources[0].Name)
	require.Equal(t, 2, tr.Manifests)
	got, err := tr.Bundle.Read("child/manifest.yaml")
	require.NoError(t, err)
	require.Contains(t, string(got), "data.app.port")
}

func TestCheckRejectsBeforeRunning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		o         Opts
		want      []string
	}{
		{name: "apply noop of the wrong type through data",
			src: `data: {mode: "yes"}
resources:
  - exec:
      - first: {command: /bin/true}
  - apply:
      - child.yaml: {noop: "{{ lookup('data.mode') }}"}
`,
			want: []string{`m.yaml:6:9: resources[1].apply[0].child.yaml: apply#child.yaml: property "noop": expected bool, got string`}},
		{name: "apply data missing key",
			src:  "resources:\n  - apply:\n      - child.yaml: {data: {x: \"{{ lookup('data.nope') }}\"}}\n",
			want: []string{`m.yaml:3:9: resources[0].apply[0].child.yaml: apply#child.yaml: data.x: lookup "data.nope": key not found`}},
		{name: "syntax errors in any field, all at once, without facts",
			src: `resources:
  - file:
      - /tmp/1: {content: a}
      - /tmp/2: {content: b}
      - /tmp/3: {content: "{{ lookup('facts.x') "}
      - /tmp/4: {content: d, control: {if: "1 +"}}
      - /tmp/5: {content: "{{ nosuch(1) }}"}
`,
			want: []string{
				`m.yaml:5:9: resources[0].file[2]./tmp/3.content: template: "{{" at offset 0 has no closing "}}"`,
				`m.yaml:6:9: resources[0].file[3]./tmp/4.control.if: template: expression "1 +"`,
				`m.yaml:7:9: resources[0].file[4]./tmp/5.content: template: expression "nosuch(1)": unknown name nosuch`,
			}},
		{name: "a fact in a name is a clear error",
			src:  "resources:\n  - file:\n      - \"/tmp/{{ lookup('facts.host') }}\": {content: a}\n",
			o:    Opts{Facts: map[string]any{"host": "h"}},
			want: []string{`file#/tmp/{{ lookup('facts.host') }}.name: compile: names, aliases and references are rendered from data`}},
		{name: "annotation violated",
			src: `data:
  # @require
  user: ""
  port: 80 # @validate isInt(value) && int(value) < 1024
resources: []
`,
			o: Opts{Run: map[string]any{"port": 8080}},
			want: []string{
				`m.yaml:3: data.user: @require: a value is required, got ""`,
				`m.yaml:4: data.port: @validate isInt(value) && int(value) < 1024: "8080" is not valid`,
			}},
		{name: "hierarchy entry that does not parse",
			src:  "hierarchy: {order: [\"os:{{ lookup('facts.os') \"]}\nresources: []\n",
			want: []string{`m.yaml: hierarchy.order[0]: template: "{{" at offset 3 has no closing`}},
		{name: "data value over a missing fact",
			src:  "data: {motd: \"{{ lookup('facts.hostname') }}\"}\nresources: []\n",
			want: []string{`m.yaml: data.motd: lookup "facts.hostname": key not found`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := compileSrc(t, "m.yaml", tt.src, tt.o)
			require.Error(t, err)
			lines := errLines(t, err)
			require.Len(t, lines, len(tt.want), "%v", lines)
			for i, w := range tt.want {
				require.True(t, strings.HasPrefix(lines[i], w) || strings.Contains(lines[i], w), "line %d: %q does not hold %q", i, lines[i], w)
			}
		})
	}
}

func TestAnnotationErrorIsSentinel(t *testing.T) {
	t.Parallel()
	_, err := compileSrc(t, "m.yaml", "data:\n  # @require\n  user: \"\"\nresources: []\n", Opts{})
	require.True(t, errors.Is(err, hiera.ErrAnnotation))
	// JSON has no comments: nothing to check.
	_, err = compileSrc(t, "m.json", `{"data": {"user": ""}, "resources": []}`, Opts{})
	require.NoError(t, err)
}

func TestChildErrorsFailTheTree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml": "resources:\n  - file:\n      - /tmp/a: {content: a}\n  - apply:\n      - sub/child.yaml: {data: {x: 1}}\n",
		"sub/child.yaml": "resources:\n  - file:\n      - /tmp/b: {content: \"y={{ lookup('data.y') }}\", require: [\"file#/tmp/a\"]}\n" +
			"      - /tmp/c: {content: \"x={{ lookup('data.x') }}\"}\n",
	})
	_, err := Build(filepath.Join(dir, "manifest.yaml"), Opts{})
	lines := errLines(t, err)
	require.Len(t, lines, 1)
	require.Contains(t, lines[0], filepath.Join(dir, "sub", "child.yaml")+":3:9:")
	require.Contains(t, lines[0], `lookup "data.y": key not found`)
	// With the key, the child's reference to its parent's resource is
	// accepted.
	_, err = Build(filepath.Join(dir, "manifest.yaml"), Opts{Run: map[string]any{"y": 2}})
	require.NoError(t, err)
}

func TestDirReachesFileFunctions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml": "resources:\n  - file:\n      - /tmp/a: {content: \"{{ file('cmd.txt') }}\"}\n      - /tmp/b: {content: \"{{ file('nosuch.txt') }}\"}\n",
		"cmd.txt":       "/bin/true",
	})
	// A file that is missing on this host is the worker's to find: it is
	// not a validation error here.
	_, err := Build(filepath.Join(dir, "manifest.yaml"), Opts{})
	require.NoError(t, err)
}

package compile

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// refs lists a plan's resources as "type#name".
func refs(p *Plan) []string {
	var out []string
	for _, r := range p.Manifest.Resources {
		out = append(out, r.Ref())
	}
	return out
}

// CCM's own resources_jet_file test manifest: the jet file ranges over
// data the hierarchy resolved for the host's facts.
const ccmJetManifest = `hierarchy:
  order:
    - os:{{ lookup('facts.os') }}
    - default
  merge: deep
data:
  packages: []
overrides:
  os:linux:
    packages: ["one", "two"]
ccm:
  resources_jet_file: resources.jet
`

const ccmJetTemplate = `[[ range Data.packages ]]
- package:
    - defaults:
       ensure: present
    - [[ . ]]: {}
[[ end ]]`

func TestResourcesJetFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"manifest.yaml": ccmJetManifest, "resources.jet": ccmJetTemplate})
	entry := filepath.Join(dir, "manifest.yaml")

	tr, err := Build(entry, Opts{Facts: map[string]any{"os": "linux"}})
	require.NoError(t, err)
	require.Equal(t, []string{"package#one", "package#two"}, refs(tr.Plan))
	for _, r := range tr.Plan.Manifest.Resources {
		require.Equal(t, "present", r.Ensure, r.Ref())
		require.Contains(t, r.Pos.File, "resources.jet (rendered)")
	}
	got, err := tr.Bundle.Read("resources.jet")
	require.NoError(t, err, "the jet file is bundled")
	require.Equal(t, ccmJetTemplate, string(got))

	// Another host's facts: no override, the template renders no resource.
	_, err = Build(entry, Opts{Facts: map[string]any{"os": "darwin"}})
	require.ErrorIs(t, err, schemas.ErrNoResources)
	require.Contains(t, err.Error(), "resources.jet (rendered): resources: the template rendered no resources")

	// The coordinator compiles from the bundle, without the directory.
	m, err := schemas.ParseUnchecked("manifest.yaml", []byte(ccmJetManifest))
	require.NoError(t, err)
	b := tr.Bundle
	p, err := Compile(m, Opts{Facts: map[string]any{"os": "linux"}, Files: func(n string) ([]byte, error) { return b.Read(n) }})
	require.NoError(t, err)
	require.Equal(t, []string{"package#one", "package#two"}, refs(p))

	// An inline manifest has no directory to read the template from.
	m, err = schemas.ParseUnchecked("manifest.yaml", []byte(ccmJetManifest))
	require.NoError(t, err)
	_, err = Compile(m, Opts{})
	require.ErrorIs(t, err, ErrNoManifestDir)
}

func TestResourcesJetFileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, manifest, jet string
		want                []string
		is                  error
	}{
		{name: "with resources",
			manifest: "resources_jet_file: r.jet\nresources:\n  - exec:\n      - /bin/true: {}\n",
			want:     []string{"resources and resources_jet_file cannot be used together"}},
		{name: "both top level and ccm",
			manifest: "resources_jet_file: r.jet\nccm:\n  resources_jet_file: r.jet\n",
			want:     []string{"ccm.resources_jet_file: resources_jet_file is set both at the top level and in ccm"}},
		{name: "jet syntax error",
			manifest: "resources_jet_file: r.jet\n", jet: "[[ range Data.x ]]\n- exec: []\n",
			want: []string{"m.yaml: resources_jet_file: template: jet: r.jet:", "unexpected EOF"}},
		{name: "missing data key",
			manifest: "resources_jet_file: r.jet\n", jet: `[[ lookup("data.nope") ]]`,
			want: []string{"resources_jet_file", `"data.nope": key not found`}},
		{name: "outside the directory",
			manifest: "resources_jet_file: ../r.jet\n",
			want:     []string{"resources_jet_file", "outside the manifest directory"}, is: template.ErrOutsideDir},
		{name: "not a list",
			manifest: "resources_jet_file: r.jet\n", jet: "exec: {}\n",
			want: []string{"r.jet (rendered)", "must render a list of resources"}},
		{name: "bad property in a generated resource",
			manifest: "resources_jet_file: r.jet\n", jet: "- exec:\n    - /bin/true: {timeout: 5s}\n    - /bin/false: {retrys: 1}\n",
			want: []string{`r.jet (rendered):3:20: resources[0].exec[1]./bin/false.retrys: field not allowed (did you mean "retry"?)`}},
		{name: "bad yaml",
			manifest: "resources_jet_file: r.jet\n", jet: "- exec:\n  - : [\n",
			want: []string{"r.jet (rendered)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			files := map[string]string{"m.yaml": tt.manifest}
			if tt.jet != "" {
				files["r.jet"] = tt.jet
			}
			writeTree(t, dir, files)
			_, err := Build(filepath.Join(dir, "m.yaml"), Opts{})
			require.Error(t, err)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
		})
	}
}

// Files that templates read are shipped in the bundle: those read while
// compiling, those named in literal arguments of properties that only a
// worker can render (facts), and those a template file names in a branch
// this host does not take.
func TestBuildBundlesTemplateFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml": `
data: {motd: files/motd.txt}
resources:
  - file:
      - /tmp/a: {content: "{{ file(lookup('data.motd')) }}"}
      - /tmp/b: {content: "{{ lookup('facts.host') }} {{ template('conf/app.templ') }}"}
      - /tmp/c: {content: "${ jet('conf/servers.jet') }"}
      - /tmp/d: {content: "{{ jet('inline [[ 1 ]]') }} {{ template('inline {{ 2 }}') }}"}
`,
		"files/motd.txt":   "motd\n",
		"conf/app.templ":   "app={{ lookup('data.motd') }}",
		"conf/servers.jet": `[[ if Facts.prod ]][[ file("conf/prod.txt") ]][[ else ]]dev[[ end ]]`,
		"conf/prod.txt":    "prod\n",
		"unused.txt":       "not bundled",
	})
	tr, err := Build(filepath.Join(dir, "manifest.yaml"), Opts{})
	require.NoError(t, err)
	want := []string{"conf/app.templ", "conf/prod.txt", "conf/servers.jet", "files/motd.txt", "manifest.yaml"}
	require.Equal(t, want, tr.Bundle.Names())
	_, err = tr.Bundle.Read("unused.txt")
	require.ErrorIs(t, err, bundle.ErrNotInBundle)
}

func TestBuildMissingTemplateFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml": "resources:\n  - file:\n      - /tmp/a: {content: \"{{ lookup('facts.x') }}{{ file('nope.txt') }}\"}\n",
	})
	// Missing here is the worker's to report (the property may never be
	// rendered): not a validation error, and nothing is bundled.
	tr, err := Build(filepath.Join(dir, "manifest.yaml"), Opts{})
	require.NoError(t, err)
	require.Equal(t, []string{"manifest.yaml"}, tr.Bundle.Names())
}

func TestManifestDefaults(t *testing.T) {
	t.Parallel()
	const src = `
defaults:
  file: {owner: app, mode: "0600", ensure: present}
  exec: {timeout: 5s}
resources:
  - file:
      - /tmp/a: {}
      - /tmp/b: {mode: "0644"}
      - defaults: {mode: "0640"}
      - /tmp/c: {}
  - file:
      - /tmp/d: {}
  - {type: exec, name: /bin/true}
  - {type: exec, name: /bin/false, timeout: 1s}
`
	p, err := compileSrc(t, "m.yaml", src, Opts{})
	require.NoError(t, err)
	type got struct {
		owner, mode any
		ensure      string
	}
	files := map[string]got{}
	for _, r := range p.Manifest.Resources {
		if r.Type == "file" {
			files[r.Name] = got{r.Properties["owner"], r.Properties["mode"], r.Ensure}
		}
	}
	require.Equal(t, map[string]got{
		"/tmp/a": {"app", "0600", "present"},
		"/tmp/b": {"app", "0644", "present"},
		"/tmp/c": {"app", "0640", "present"}, // the block's defaults over the manifest's
		"/tmp/d": {"app", "0600", "present"}, // a new block starts from the manifest's again
	}, files)
	require.Equal(t, "5s", p.Manifest.Resources[4].Timeout.String())
	require.Equal(t, "1s", p.Manifest.Resources[5].Timeout.String())

	// Bad defaults name the key.
	for _, tt := range []struct{ src, want string }{
		{"defaults: {fiel: {mode: '0600'}}\n", `m.yaml:1:12: defaults.fiel: unknown resource type "fiel" (did you mean "file"?)`},
		{"defaults: {file: {mdoe: '0600'}}\n", `defaults.file.mdoe: field not allowed (did you mean "mode"?)`},
		{"defaults: {file: {mode: '999'}}\n", `defaults.file.mode: invalid value "999"`},
		{"defaults: {file: {}}\nccm:\n  defaults: {file: {}}\n", "ccm.defaults: defaults is set both at the top level and in ccm"},
	} {
		_, err := compileSrc(t, "m.yaml", tt.src, Opts{})
		require.Error(t, err, tt.src)
		require.Contains(t, err.Error(), tt.want)
	}
}

// Manifest defaults reach the resources a jet file generates.
func TestManifestDefaultsInJetFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"m.yaml": "data: {n: [a, b]}\nccm:\n  defaults: {exec: {timeout: 7s}}\n  resources_jet_file: r.jet\n",
		"r.jet":  "[[ range Data.n ]]\n- exec:\n    - /bin/echo [[ . ]]: {}\n[[ end ]]",
	})
	tr, err := Build(filepath.Join(dir, "m.yaml"), Opts{})
	require.NoError(t, err)
	require.Equal(t, []string{"exec#/bin/echo a", "exec#/bin/echo b"}, refs(tr.Plan))
	for _, r := range tr.Plan.Manifest.Resources {
		require.Equal(t, "7s", r.Timeout.String())
	}
}

func TestMessages(t *testing.T) {
	t.Parallel()
	const src = `
data: {app: shop}
ccm:
  pre_message: "Updating {{ lookup('data.app') }} on {{ lookup('facts.host', 'somewhere') }}"
  post_message: |
    Done: ${ upper(data.app) }
  resources:
    - exec:
        - /bin/true: {}
`
	p, err := compileSrc(t, "m.yaml", src, Opts{Facts: map[string]any{"host": "web1"}})
	require.NoError(t, err)
	require.Equal(t, "Updating shop on web1", p.PreMessage)
	require.Equal(t, "Done: SHOP\n", p.PostMessage)

	// A fact the compiling host does not have is left as written.
	p, err = compileSrc(t, "m.yaml", "pre_message: \"on {{ lookup('facts.host') }}\"\nresources: []\n", Opts{})
	require.NoError(t, err)
	require.Equal(t, "on {{ lookup('facts.host') }}", p.PreMessage)

	for _, tt := range []struct{ src, want string }{
		{"pre_message: \"{{ lookup('data.nope') }}\"\n", `m.yaml: pre_message: lookup "data.nope": key not found`},
		{"post_message: \"{{ 1 + }}\"\n", "m.yaml: post_message: template: expression"},
		{"post_message: \"{{ 1\"\n", `m.yaml: post_message: template: "{{" at offset 0 has no closing`},
	} {
		_, err := compileSrc(t, "m.yaml", tt.src, Opts{})
		require.Error(t, err, tt.src)
		require.Contains(t, err.Error(), tt.want)
	}
}

func TestFileRefsAreLocal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"manifest.yaml": "resources:\n  - file:\n      - /tmp/a: {content: \"{{ lookup('facts.x') }}{{ file('../secret') }}\"}\n",
	})
	_, err := Build(filepath.Join(dir, "manifest.yaml"), Opts{})
	require.ErrorIs(t, err, template.ErrOutsideDir)
	require.True(t, slices.ContainsFunc(errLines(t, err), func(l string) bool { return strings.Contains(l, "file#/tmp/a") }))
	require.False(t, errors.Is(err, bundle.ErrNotInBundle))
}

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), IO{Stdout: &out, Stderr: &errOut}, args)
	return result{code, out.String(), errOut.String()}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(strings.ReplaceAll(content, "$D", dir)), 0o644))
	}
}

// A run override of one key of a map keeps its other keys everywhere: the
// child named from the map is bundled and applied.
func TestApplyDataOverrideKeepsNestedKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"manifest.yaml": `data: {app: {name: child, port: 1}}
resources:
  - apply:
      - "{{ lookup('data.app.name') }}/manifest.yaml": {}
`,
		"child/manifest.yaml": "resources:\n  - file:\n      - $D/out.txt: {content: \"port={{ lookup('data.app.port') }}\"}\n",
	})
	r := run(t, "apply", filepath.Join(dir, "manifest.yaml"), "--data", "app.port=80", "--facts-dir", dir)
	require.Equal(t, ExitOK, r.code, "%+v", r)
	got, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	require.NoError(t, err)
	require.Equal(t, "port=80", string(got))
}

// An apply resource whose property has the wrong type fails validate, and
// apply before any resource runs.
func TestApplyPropertiesValidatedBeforeRunning(t *testing.T) {
	t.Parallel()
	for name, noop := range map[string]string{"literal": `"yes"`, "templated": `"{{ lookup('data.mode') }}"`} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{
				"manifest.yaml": `data: {mode: "yes"}
resources:
  - exec:
      - first: {command: "/usr/bin/touch $D/ran"}
  - apply:
      - child.yaml: {noop: ` + noop + `}
`,
				"child.yaml": "resources: []\n",
			})
			m := filepath.Join(dir, "manifest.yaml")
			r := run(t, "validate", m, "--facts-dir", dir)
			require.Equal(t, ExitInvalid, r.code, "%+v", r)
			require.Contains(t, r.stderr, m+":6:")
			require.Contains(t, r.stderr, "noop")
			r = run(t, "apply", m, "--facts-dir", dir)
			require.Equal(t, ExitInvalid, r.code, "%+v", r)
			require.NoFileExists(t, filepath.Join(dir, "ran"), "exec#first ran before the invalid apply was found")
		})
	}
}

// A syntax error in resource 3 of 5 fails validate naming it, and apply
// writes nothing.
func TestTemplateSyntaxCheckedBeforeFirstTask(t *testing.T) {
	t.Parallel()
	for name, bad := range map[string]string{
		"unclosed":         `{content: "{{ lookup('facts.x') "}`,
		"unknown function": `{content: "{{ nosuch(1) }}"}`,
		"control":          `{content: "3", control: {if: "1 +"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"manifest.yaml": `resources:
  - file:
      - $D/1: {content: "1"}
      - $D/2: {content: "2"}
      - $D/3: ` + bad + `
      - $D/4: {content: "4"}
      - $D/5: {content: "5"}
`})
			m := filepath.Join(dir, "manifest.yaml")
			r := run(t, "validate", m, "--facts-dir", dir)
			require.Equal(t, ExitInvalid, r.code, "%+v", r)
			require.Contains(t, r.stderr, m+":5:")
			require.Contains(t, r.stderr, filepath.Join(dir, "3"))
			r = run(t, "apply", m, "--facts-dir", dir)
			require.Equal(t, ExitInvalid, r.code, "%+v", r)
			for _, f := range []string{"1", "2", "3", "4", "5"} {
				require.NoFileExists(t, filepath.Join(dir, f))
			}
		})
	}
}

// The hierarchy resolves over this host's facts, --fact overriding them;
// --data-file (alias --hiera) and --data are merged last.
func TestRenderHierarchyWithFactsAndDataFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"site.yaml": `hierarchy:
  order: ["env:{{ lookup('facts.env') }}", "role:{{ lookup('facts.role') }}"]
  merge: deep
data:
  package: httpd
  packages: [base]
  web: {port: 80, tls: false}
overrides:
  env:prod: {packages: [nginx], web: {port: 443}}
  role:web: {package: apache2}
resources:
  - file:
      - "$D/{{ lookup('data.package') }}.conf": {content: "{{ lookup('data.web.port') }} {{ lookup('data.web.tls') }} {{ join(lookup('data.packages'), ',') }}"}
`,
		"facts.d/10-role.yaml": "role: web\nenv: dev\n",
		"extra.json":           `{"web": {"tls": true}}`,
	})
	m := filepath.Join(dir, "site.yaml")
	name := func(r result) string {
		require.Equal(t, ExitOK, r.code, "%+v", r)
		var out struct {
			Resources []struct {
				Name string `json:"name"`
			} `json:"resources"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		return filepath.Base(out.Resources[0].Name)
	}
	require.Equal(t, "apache2.conf", name(run(t, "render", m, "--facts-dir", dir)))
	require.Equal(t, "httpd.conf", name(run(t, "render", m, "--facts-dir", dir, "--fact", "role=db")))

	r := run(t, "apply", m, "--facts-dir", dir, "--fact", "env=prod", "--data-file", filepath.Join(dir, "extra.json"), "--data", "package=x")
	require.Equal(t, ExitOK, r.code, "%+v", r)
	got, err := os.ReadFile(filepath.Join(dir, "x.conf"))
	require.NoError(t, err)
	require.Equal(t, "443 true base,nginx", string(got))

	r = run(t, "validate", m, "--data-file", filepath.Join(dir, "nosuch.yaml"))
	require.Equal(t, ExitInvalid, r.code)
	require.Contains(t, r.stderr, "nosuch.yaml")
}

func TestDataFileLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"m.yaml": "resources: []\n"})
	at := filepath.Join(dir, "at.yaml")
	over := filepath.Join(dir, "over.yaml")
	line := "# padding\n"
	pad := strings.Repeat(line, MaxDataFileBytes/len(line))
	require.NoError(t, os.WriteFile(at, []byte("a: 1\n"+pad[:MaxDataFileBytes-5]), 0o644))
	require.NoError(t, os.WriteFile(over, []byte("a: 1\n"+pad[:MaxDataFileBytes-4]), 0o644))
	r := run(t, "validate", filepath.Join(dir, "m.yaml"), "--facts-dir", dir, "--data-file", at)
	require.Equal(t, ExitOK, r.code, "%+v", r)
	r = run(t, "validate", filepath.Join(dir, "m.yaml"), "--facts-dir", dir, "--data-file", over)
	require.Equal(t, ExitInvalid, r.code)
	require.Contains(t, r.stderr, "larger than the limit of 4194304 bytes")
}

func TestFactsCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"facts.json": `{"role": "web", "net": {"zone": "a"}}`})
	r := run(t, "facts", "--facts-dir", dir, "--no-system", "--fact", "net.zone=b")
	require.Equal(t, ExitOK, r.code, "%+v", r)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, map[string]any{"role": "web", "net": map[string]any{"zone": "b"}}, got)

	r = run(t, "facts", "--facts-dir", dir, "role")
	require.Equal(t, result{ExitOK, "web\n", ""}, r)
	r = run(t, "facts", "--facts-dir", dir, "host.info.os")
	require.Equal(t, ExitOK, r.code, "system facts are gathered: %+v", r)
	require.NotEmpty(t, strings.TrimSpace(r.stdout))
	r = run(t, "facts", "--facts-dir", dir, "--no-system", "nosuch")
	require.Equal(t, ExitFailed, r.code)
	require.Contains(t, r.stderr, `no fact "nosuch"`)
	r = run(t, "facts", "--fact", "=x")
	require.Equal(t, ExitInvalid, r.code)
}

func TestFactsSummary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		facts map[string]any
		want  string
	}{
		{map[string]any{"host": map[string]any{"info": map[string]any{"hostname": "web1", "platform": "debian", "kernelArch": "x86_64"}},
			"cpu": map[string]any{"info": []any{map[string]any{}, map[string]any{}}}}, "hostname=web1 os=debian arch=x86_64 cpus=2"},
		{map[string]any{"hostname": "old", "os": "linux", "arch": "amd64", "cpus": 4}, "hostname=old os=linux arch=amd64 cpus=4"},
		{nil, "-"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, factsSummary(tt.facts))
	}
}

// The embedded worker renders templates with this host's facts, and
// file() reads next to the manifest.
func TestApplyTemplatesSeeFactsAndFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"manifest.yaml":  "resources:\n  - file:\n      - $D/out.txt: {content: \"{{ lookup('facts.role') }} {{ file('files/motd.txt') }}\"}\n",
		"files/motd.txt": "hello",
		"facts.yaml":     "role: web\n",
	})
	r := run(t, "apply", filepath.Join(dir, "manifest.yaml"), "--facts-dir", dir)
	require.Equal(t, ExitOK, r.code, "%+v", r)
	got, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	require.NoError(t, err)
	require.Equal(t, "web hello", string(got))
}

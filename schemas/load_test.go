package schemas

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// wantResources is the model every fixture in testdata/same describes.
var wantResources = []Resource{
	{
		Type: "file", Name: "/srv/app/app.conf", Ensure: "present",
		Properties: map[string]any{
			"owner": "app", "group": "app", "mode": "0644",
			"content": "port={{ lookup('data.port') }}\n",
		},
	},
	{
		Type: "file", Name: "/srv/app/data", Ensure: "directory",
		Properties: map[string]any{"owner": "app", "group": "app", "mode": "0755"},
	},
	{
		// The second defaults entry replaced the first: no group, no mode.
		Type: "file", Name: "/etc/motd", Ensure: "present", Timeout: 30 * time.Second,
		Properties: map[string]any{"owner": "root", "source": "files/motd"},
	},
	{
		Type: "exec", Name: "reload", Subscribe: []string{"file#/srv/app/app.conf"}, Retry: 2,
		Properties: map[string]any{
			"command": "/usr/bin/systemctl reload app", "refreshonly": true, "returns": []any{0},
		},
	},
	{
		Type: "apply", Name: "monitoring/manifest.yaml",
		Properties: map[string]any{
			"allow_apply": true, "data": map[string]any{"alert_email": "ops@example.com"},
		},
	},
}

// model strips what legitimately differs between shapes and formats: where
// things are written.
func model(m *Manifest) []Resource {
	out := make([]Resource, len(m.Resources))
	for i, r := range m.Resources {
		r.Pos, r.Path = Position{}, ""
		out[i] = r
	}
	return out
}

func TestShapesAndFormatsNormaliseAlike(t *testing.T) {
	t.Parallel()
	for _, file := range []string{
		"block.yaml", // CCM block shape with defaults entries
		"flat.yaml",  // flat shape
		"ccm.yaml",   // under ccm:, mixed shapes
		"block.json", // JSON, mixed shapes
		"gen.cue",    // CUE, file resources from a comprehension
	} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			m, err := Load(filepath.Join("testdata", "same", file))
			require.NoError(t, err)
			require.Equal(t, wantResources, model(m))
			require.Equal(t, map[string]any{"port": 8080}, m.Data)
			require.Equal(t, OrderingManifest, m.Ordering)
			for _, r := range m.Resources {
				require.Equal(t, filepath.Join("testdata", "same", file), r.Pos.File)
				require.NotZero(t, r.Pos.Line, r.Ref())
				require.NotEmpty(t, r.Path, r.Ref())
			}
		})
	}
}

func TestParsePositionsAndPaths(t *testing.T) {
	t.Parallel()
	m, err := Load("testdata/same/block.yaml")
	require.NoError(t, err)
	require.Equal(t, Position{File: "testdata/same/block.yaml", Line: 7, Column: 9}, m.Resources[0].Pos)
	require.Equal(t, "resources[0].file[1]./srv/app/app.conf", m.Resources[0].Path)
	require.Equal(t, "resources[2].apply[0].monitoring/manifest.yaml", m.Resources[4].Path)
}

func TestParseCCMSection(t *testing.T) {
	t.Parallel()
	src := []byte("ccm:\n  fail_on_error: true\n  resources:\n    - {type: exec, name: uptime}\n")
	m, err := Parse("ccm.yaml", src)
	require.NoError(t, err)
	require.True(t, m.FailOnError)
	require.Len(t, m.Resources, 1)
	require.Equal(t, "exec#uptime", m.Resources[0].Ref())
	require.Equal(t, "ccm.resources[0]", m.Resources[0].Path)
}

func TestParseUnknownExtensionIsYAML(t *testing.T) {
	t.Parallel()
	m, err := Parse("manifest.txt", []byte("resources: [{type: exec, name: uptime}]\n"))
	require.NoError(t, err)
	require.Len(t, m.Resources, 1)
}

func TestParseValid(t *testing.T) {
	t.Parallel()

	t.Run("reserved sections and common properties", func(t *testing.T) {
		t.Parallel()
		m, err := Load("testdata/valid/reserved.yaml")
		require.NoError(t, err)
		require.True(t, m.FailOnError)
		require.Equal(t, Hierarchy{Order: []string{"os:{{ lookup('facts.host.info.platformFamily') }}"}}, m.Hierarchy)
		require.Equal(t, map[string]map[string]any{"os:debian": {"port": 8081}}, m.Overrides)
		r := m.Resources[0]
		require.Equal(t, &Control{If: "lookup('facts.ok')"}, r.Control)
		require.Equal(t, []map[string]any{{"command": "/bin/true", "tries": 3}}, r.HealthChecks)
		require.Equal(t, "edge", r.Target)
		require.Equal(t, 2*time.Minute, r.Timeout)
		require.Empty(t, r.Properties)
	})

	t.Run("templates are kept, references left for the coordinator", func(t *testing.T) {
		t.Parallel()
		m, err := Load("testdata/valid/templated.yaml")
		require.NoError(t, err)
		require.Equal(t, "/etc/{{ lookup('data.app') }}.conf", m.Resources[0].Name)
		require.Equal(t, "{{ lookup('data.mode', '0644') }}", m.Resources[0].Properties["mode"])
		require.Equal(t, "{{ lookup('data.refresh', true) }}", m.Resources[1].Properties["refreshonly"])
		require.Equal(t, []any{0, "{{ lookup('data.code') }}"}, m.Resources[1].Properties["returns"])

		// The coordinator renders names and references, then checks them.
		m.Resources[0].Name = "/etc/web.conf"
		m.Resources[1].Subscribe = []string{"file#/etc/web.conf"}
		require.NoError(t, CheckReferences(m))
		m.Resources[1].Subscribe = []string{"file#/etc/db.conf"}
		require.Error(t, CheckReferences(m))
	})

	t.Run("later reference with ordering graph", func(t *testing.T) {
		t.Parallel()
		m, err := Load("testdata/valid/later_ref_graph.yaml")
		require.NoError(t, err)
		require.Equal(t, OrderingGraph, m.Ordering)
	})
}

func TestParseMisspelledKey(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("testdata/site.yaml")
	require.NoError(t, err)
	_, err = Parse("site.yaml", src)
	require.EqualError(t, err, `site.yaml:6:11: resources[1].file[0]./tmp/x.contnet: field not allowed (did you mean "content"?)`)

	var errs Errors
	require.True(t, errors.As(err, &errs))
	require.Len(t, errs, 1)
	var first *Error
	require.True(t, errors.As(err, &first))
	require.Equal(t, &Error{
		Pos:     Position{File: "site.yaml", Line: 6, Column: 11},
		Path:    "resources[1].file[0]./tmp/x.contnet",
		Message: `field not allowed (did you mean "content"?)`,
	}, first)
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want []string
	}{
		{"unknown_type.yaml", []string{
			`unknown_type.yaml:2:5: resources[0]: unknown resource type "packge" (did you mean "package"?); known types: ` + strings.Join(Types(), ", "),
			`unknown_type.yaml:4:6: resources[1].type: unknown resource type "cron"; known types: ` + strings.Join(Types(), ", "),
		}},
		{"bad_mode.yaml", []string{
			`bad_mode.yaml:4:17: resources[0].file[0]./etc/a.mode: conflicting values 644 and string (mismatched types int and string)`,
			`bad_mode.yaml:6:17: resources[0].file[1]./etc/b.mode: invalid value "0855" (out of bound =~"^[0-7]{3,4}$|\\{\\{|\\$\\{")`,
		}},
		{"bad_timeout.yaml", []string{
			`bad_timeout.yaml:4:11: resources[0].exec[0]./bin/true.timeout: invalid duration "30 seconds": write a Go duration such as "30s", "2m" or "1h30m"`,
		}},
		{"content_source.yaml", []string{
			`content_source.yaml:5:11: resources[0].file[1]./etc/motd.source: content and source are mutually exclusive; set only one`,
		}},
		{"duplicate.yaml", []string{
			`duplicate.yaml:5:5: resources[1]: duplicate resource file#/etc/motd: already declared at duplicate.yaml:3:9 (resources[0].file[0]./etc/motd)`,
			`duplicate.yaml:6:5: resources[2]: duplicate resource file#motd: already the alias of file#/etc/issue at duplicate.yaml:4:9 (resources[0].file[1]./etc/issue)`,
		}},
		{"unknown_ref.yaml", []string{
			`unknown_ref.yaml:5:9: resources[1].exec[0].reload.require[0]: require package#app: unknown resource`,
			`unknown_ref.yaml:5:9: resources[1].exec[0].reload.require[1]: require "app.conf" is not a reference; write type#name or type#alias`,
			`unknown_ref.yaml:5:9: resources[1].exec[0].reload.subscribe[0]: subscribe file#/etc/app.cnf: unknown resource (did you mean "file#/etc/app.conf"?)`,
		}},
		{"later_ref.yaml", []string{
			`later_ref.yaml:3:9: resources[0].exec[0].reload.subscribe[0]: subscribe file#conf points to a later resource; with ordering: manifest resources run in declaration order (move it, or use ordering: graph)`,
		}},
		{"self_require.yaml", []string{
			`self_require.yaml:4:9: resources[0].exec[0].reload.require[0]: require exec#reload: a resource cannot require itself`,
		}},
		{"missing_name.yaml", []string{
			`missing_name.yaml:2:5: resources[0].name: field is required but not present`,
		}},
		{"syntax.yaml", []string{
			`syntax.yaml:2: did not find expected node content`,
		}},
		{"hierarchy.yaml", []string{
			`hierarchy.yaml:2:52: hierarchy.order[1]: conflicting values 42 and string (mismatched types int and string)`,
			`hierarchy.yaml:3:10: hierarchy.merge: invalid value "deeep" (allowed: "first" | "deep")`,
			`hierarchy.yaml:5:15: overrides.os:linux: conflicting values 5 and {...} (mismatched types int and struct)`,
		}},
		{"both_sections.yaml", []string{
			`both_sections.yaml:3:3: ccm.resources: resources are listed both at the top level and in ccm; list them in one place`,
		}},
		{"multiple.yaml", []string{
			`multiple.yaml:1:11: ordering: invalid value "grpah" (allowed: *"manifest" | "graph")`,
			`multiple.yaml:2:1: colour: field not allowed`,
			`multiple.yaml:6:11: resources[0].file[0]./etc/motd.ownr: field not allowed (did you mean "owner"?)`,
			`multiple.yaml:7:17: resources[0].file[0]./etc/motd.mode: conflicting values string and 644 (mismatched types string and int)`,
			`multiple.yaml:10:24: resources[1].exec[0]./bin/true.refreshonly: invalid value "yes" (allowed: bool | #Template)`,
			`multiple.yaml:11:18: resources[1].exec[0]./bin/true.retry: invalid value -1 (out of bound >=0)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(filepath.Join("testdata", "invalid", tt.file))
			require.NoError(t, err)
			m, err := Parse(tt.file, src)
			require.Nil(t, m)
			var errs Errors
			require.True(t, errors.As(err, &errs), "%T: %v", err, err)
			got := make([]string, len(errs))
			for i, e := range errs {
				got[i] = e.Error()
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseFormatErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, src, want string
	}{
		{
			name: "json syntax", file: "m.json",
			src:  "{\"resources\": [\n  {\"type\": \"exec\", \"name\": \"x\"},\n]}",
			want: "m.json:3:1: invalid JSON: invalid character ']' looking for beginning of value",
		},
		{
			name: "json unknown key", file: "m.json",
			src:  "{\"resources\": [\n  {\"type\": \"file\", \"name\": \"x\", \"mod\": \"0644\"}\n]}",
			want: `m.json:2:34: resources[0].mod: field not allowed (did you mean "mode"?)`,
		},
		{
			name: "cue conflict", file: "m.cue",
			src:  "resources: []\nx: 1 & 2\n",
			want: "m.cue:2:8: x: conflicting values 2 and 1",
		},
		{
			name: "cue generated key", file: "m.cue",
			src:  "resources: [for n in [\"a\"] {type: \"file\", name: n, ownr: \"x\"}]\n",
			want: `m.cue:1:52: resources[0].ownr: field not allowed (did you mean "owner"?)`,
		},
		{
			name: "not a map", file: "m.yaml",
			src:  "- a\n- b\n",
			want: "m.yaml:1:1: a manifest must be a map with resources, data, ordering, ...; got list",
		},
		{
			name: "entry not a map", file: "m.yaml",
			src:  "resources:\n  - file\n",
			want: "m.yaml:2:5: resources[0]: a resource entry must be a map: {TYPE: [{NAME: {...}}]} (block shape) or {type: TYPE, name: NAME, ...} (flat shape)",
		},
		{
			name: "bad indentation", file: "m.yaml",
			src:  "resources:\n  - file:\n      - /tmp/x:\n        owner: root\n",
			want: `m.yaml:3:9: resources[0].file[0]: a file block entry is a map with one key, the resource name: {NAME: {properties}}; got keys "/tmp/x", "owner" (check the indentation)`,
		},
		{
			name: "negative timeout", file: "m.yaml",
			src:  "resources: [{type: exec, name: x, timeout: -1s}]\n",
			want: `m.yaml:1:35: resources[0].timeout: invalid duration "-1s": must not be negative`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.file, []byte(tt.src))
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestParseDefaultsErrorsReportedOnce(t *testing.T) {
	t.Parallel()
	src := "resources:\n  - file:\n      - defaults: {ownr: app, mode: 644}\n      - /a: {}\n      - /b: {}\n"
	_, err := Parse("d.yaml", []byte(src))
	require.EqualError(t, err, `d.yaml:3:20: resources[0].file[0].defaults.ownr: field not allowed (did you mean "owner"?)`+"\n"+
		`d.yaml:3:37: resources[0].file[0].defaults.mode: conflicting values string and 644 (mismatched types string and int)`)
}

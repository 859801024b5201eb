package hiera

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	facts := map[string]any{
		"env":      "prod",
		"role":     "web",
		"hostname": "web01",
		"host":     map[string]any{"info": map[string]any{"platformFamily": "debian", "os": "linux"}},
		"empty":    "",
		"cpus":     4,
	}
	// CCM's documented example.
	ccmData := map[string]any{
		"log_level": "INFO",
		"packages":  []any{"ca-certificates"},
		"web":       map[string]any{"listen_port": 80, "tls": false},
	}
	ccmOverrides := map[string]map[string]any{
		"env:prod":   {"log_level": "WARN"},
		"role:web":   {"packages": []any{"nginx"}, "web": map[string]any{"listen_port": 443, "tls": true}},
		"host:web01": {"log_level": "TRACE"},
	}
	ccmOrder := []string{"env:${ lookup('facts.env') }", "role:${ lookup('facts.role') }", "host:{{ lookup('facts.hostname') }}"}
	h := func(merge schemas.Merge, order ...string) schemas.Hierarchy {
		return schemas.Hierarchy{Order: order, Merge: merge}
	}
	tests := []struct {
		name      string
		data      map[string]any
		hierarchy schemas.Hierarchy
		overrides map[string]map[string]any
		facts     map[string]any
		run       map[string]any
		want      map[string]any
	}{
		{
			name: "ccm example deep: all entries merge in order, lists concatenate, last wins",
			data: ccmData, hierarchy: h(schemas.MergeDeep, ccmOrder...), overrides: ccmOverrides, facts: facts,
			want: map[string]any{"log_level": "TRACE", "packages": []any{"ca-certificates", "nginx"}, "web": map[string]any{"listen_port": 443, "tls": true}},
		},
		{
			name: "ccm example first: only the first matching override, shallow",
			data: ccmData, hierarchy: h(schemas.MergeFirst, ccmOrder...), overrides: ccmOverrides, facts: facts,
			want: map[string]any{"log_level": "WARN", "packages": []any{"ca-certificates"}, "web": map[string]any{"listen_port": 80, "tls": false}},
		},
		{
			name: "merge defaults to first",
			data: ccmData, hierarchy: h("", ccmOrder...), overrides: ccmOverrides, facts: facts,
			want: map[string]any{"log_level": "WARN", "packages": []any{"ca-certificates"}, "web": map[string]any{"listen_port": 80, "tls": false}},
		},
		{
			name: "first replaces a nested map whole",
			data: ccmData, hierarchy: h(schemas.MergeFirst, "role:{{ lookup('facts.role') }}"), overrides: ccmOverrides, facts: facts,
			want: map[string]any{"log_level": "INFO", "packages": []any{"nginx"}, "web": map[string]any{"listen_port": 443, "tls": true}},
		},
		{
			name: "first skips entries without an override section",
			data: map[string]any{"a": 1}, hierarchy: h(schemas.MergeFirst, "host:{{ lookup('facts.hostname') }}", "env:{{ lookup('facts.env') }}", "role:{{ lookup('facts.role') }}"),
			overrides: map[string]map[string]any{"env:prod": {"a": 2}, "role:web": {"a": 3}}, facts: facts,
			want: map[string]any{"a": 2},
		},
		{
			name:      "deep merges nested maps key by key",
			data:      map[string]any{"web": map[string]any{"port": 80, "tls": map[string]any{"on": false, "cert": "a"}}},
			hierarchy: h(schemas.MergeDeep, "os:{{ lookup('facts.host.info.os') }}"),
			overrides: map[string]map[string]any{"os:linux": {"web": map[string]any{"tls": map[string]any{"on": true}}}}, facts: facts,
			want: map[string]any{"web": map[string]any{"port": 80, "tls": map[string]any{"on": true, "cert": "a"}}},
		},
		{
			name:      "deep: a map replaces a scalar and a scalar a map",
			data:      map[string]any{"a": 1, "b": map[string]any{"c": 1}},
			hierarchy: h(schemas.MergeDeep, "default"),
			overrides: map[string]map[string]any{"default": {"a": map[string]any{"x": 1}, "b": "flat"}}, facts: facts,
			want: map[string]any{"a": map[string]any{"x": 1}, "b": "flat"},
		},
		{
			name: "deep: a list over a scalar replaces it",
			data: map[string]any{"a": "x"}, hierarchy: h(schemas.MergeDeep, "default"),
			overrides: map[string]map[string]any{"default": {"a": []any{"y"}}}, facts: facts,
			want: map[string]any{"a": []any{"y"}},
		},
		{
			name: "platform family picks the package name (CCM's first example)",
			data: map[string]any{"package": "httpd"}, hierarchy: h(schemas.MergeFirst, "os:{{ lookup('facts.host.info.platformFamily') }}"),
			overrides: map[string]map[string]any{"os:debian": {"package": "apache2"}, "os:rhel": {"package": "httpd"}}, facts: facts,
			want: map[string]any{"package": "apache2"},
		},
		{
			name: "no matching entry leaves the data",
			data: map[string]any{"package": "httpd"}, hierarchy: h(schemas.MergeDeep, "os:{{ lookup('facts.host.info.platformFamily') }}"),
			overrides: map[string]map[string]any{"os:rhel": {"package": "x"}}, facts: facts,
			want: map[string]any{"package": "httpd"},
		},
		{
			name: "entry with a missing fact is skipped, not matched as the bare prefix",
			data: map[string]any{"a": 1}, hierarchy: h(schemas.MergeDeep, "dc:{{ lookup('facts.dc') }}"),
			overrides: map[string]map[string]any{"dc:": {"a": 2}}, facts: facts,
			want: map[string]any{"a": 1},
		},
		{
			name: "entry with an empty fact is skipped",
			data: map[string]any{"a": 1}, hierarchy: h(schemas.MergeDeep, "e:${ lookup('facts.empty') }"),
			overrides: map[string]map[string]any{"e:": {"a": 2}}, facts: facts,
			want: map[string]any{"a": 1},
		},
		{
			name: "empty entry is skipped",
			data: map[string]any{"a": 1}, hierarchy: h(schemas.MergeDeep, "", "default"),
			overrides: map[string]map[string]any{"": {"a": 2}, "default": {"b": 2}}, facts: facts,
			want: map[string]any{"a": 1, "b": 2},
		},
		{
			name: "no order means the default entry",
			data: map[string]any{"a": 1}, overrides: map[string]map[string]any{"default": {"a": 5}}, facts: facts,
			want: map[string]any{"a": 5},
		},
		{
			name: "entry using a number fact",
			data: map[string]any{"a": 1}, hierarchy: h(schemas.MergeFirst, "cpus:{{ lookup('facts.cpus') }}"),
			overrides: map[string]map[string]any{"cpus:4": {"a": 4}}, facts: facts,
			want: map[string]any{"a": 4},
		},
		{
			name: "entry with two facts",
			data: map[string]any{"a": 1}, hierarchy: h(schemas.MergeFirst, "{{ lookup('facts.env') }}-{{ lookup('facts.role') }}"),
			overrides: map[string]map[string]any{"prod-web": {"a": 2}}, facts: facts,
			want: map[string]any{"a": 2},
		},
		{
			name:  "data values render over facts with their native type",
			data:  map[string]any{"host": "{{ lookup('facts.hostname') }}", "n": "${ lookup('facts.cpus') }", "l": []any{"x-{{ lookup('facts.env') }}"}},
			facts: facts,
			want:  map[string]any{"host": "web01", "n": 4, "l": []any{"x-prod"}},
		},
		{
			name: "override values render over facts",
			data: map[string]any{}, hierarchy: h(schemas.MergeDeep, "default"),
			overrides: map[string]map[string]any{"default": {"motd": "welcome to {{ lookup('facts.hostname') }}"}}, facts: facts,
			want: map[string]any{"motd": "welcome to web01"},
		},
		{
			name: "escaped markers stay literal",
			data: map[string]any{"script": `echo \${HOME}`}, facts: facts,
			want: map[string]any{"script": "echo ${HOME}"},
		},
		{
			name: "run data wins over overrides",
			data: ccmData, hierarchy: h(schemas.MergeDeep, ccmOrder...), overrides: ccmOverrides, facts: facts,
			run:  map[string]any{"log_level": "DEBUG", "web": map[string]any{"tls": false}},
			want: map[string]any{"log_level": "DEBUG", "packages": []any{"ca-certificates", "nginx"}, "web": map[string]any{"listen_port": 443, "tls": false}},
		},
		{
			name: "run data replaces lists rather than concatenating",
			data: ccmData, hierarchy: h(schemas.MergeDeep, ccmOrder...), overrides: ccmOverrides, facts: facts,
			run:  map[string]any{"packages": []any{"only"}},
			want: map[string]any{"log_level": "TRACE", "packages": []any{"only"}, "web": map[string]any{"listen_port": 443, "tls": true}},
		},
		{
			name: "run data is not rendered",
			data: map[string]any{}, facts: facts,
			run:  map[string]any{"raw": "{{ lookup('facts.nope') }}"},
			want: map[string]any{"raw": "{{ lookup('facts.nope') }}"},
		},
		{
			name: "nil everything",
			want: map[string]any{},
		},
		{
			name: "run data alone",
			run:  map[string]any{"a": []any{1}},
			want: map[string]any{"a": []any{1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Resolve(tt.data, tt.hierarchy, tt.overrides, tt.facts, tt.run)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestResolveDoesNotModifyInputs(t *testing.T) {
	t.Parallel()
	data := map[string]any{"l": []any{"a"}, "m": map[string]any{"k": 1}}
	over := map[string]map[string]any{"default": {"l": []any{"b"}, "m": map[string]any{"k": 2}}}
	run := map[string]any{"m": map[string]any{"j": 3}}
	got, err := Resolve(data, schemas.Hierarchy{Merge: schemas.MergeDeep}, over, nil, run)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"l": []any{"a", "b"}, "m": map[string]any{"k": 2, "j": 3}}, got)
	got["l"].([]any)[0] = "changed"
	got["m"].(map[string]any)["k"] = 99
	require.Equal(t, map[string]any{"l": []any{"a"}, "m": map[string]any{"k": 1}}, data)
	require.Equal(t, map[string]map[string]any{"default": {"l": []any{"b"}, "m": map[string]any{"k": 2}}}, over)
	require.Equal(t, map[string]any{"m": map[string]any{"j": 3}}, run)
}

func TestResolveErrors(t *testing.T) {
	t.Parallel()
	facts := map[string]any{"env": "prod"}
	tests := []struct {
		name      string
		data      map[string]any
		hierarchy schemas.Hierarchy
		overrides map[string]map[string]any
		msg       string
		is        error
		as        any
	}{
		{name: "unknown merge", hierarchy: schemas.Hierarchy{Merge: "deeep"}, msg: `hiera: unknown merge mode "deeep": use "first" or "deep"`, is: ErrMerge},
		{name: "entry syntax error", hierarchy: schemas.Hierarchy{Order: []string{"default", "env:{{ lookup('facts.env') }"}},
			msg: `hierarchy.order[1] "env:{{ lookup('facts.env') }": template: "{{" at offset 4 has no closing "}}"`, as: new(*template.SyntaxError)},
		{name: "entry expression error", hierarchy: schemas.Hierarchy{Order: []string{"x:{{ 1 + }}"}}, msg: `hierarchy.order[0] "x:{{ 1 + }}": template: expression "1 +"`, as: new(*EntryError)},
		{name: "data lookup of a missing fact", data: map[string]any{"web": map[string]any{"host": "{{ lookup('facts.hostname') }}"}},
			msg: `data.web.host: lookup "facts.hostname": key not found`, as: new(*template.MissingKeyError)},
		{name: "data cannot look up data", data: map[string]any{"a": 1, "b": "{{ lookup('data.a') }}"}, msg: `data.b: lookup "data.a": key not found`},
		{name: "override value error names the section", hierarchy: schemas.Hierarchy{Order: []string{"env:{{ lookup('facts.env') }}"}},
			overrides: map[string]map[string]any{"env:prod": {"x": []any{"ok", "${ nope( }"}}}, msg: `overrides.env:prod.x.1: template: expression "nope("`},
		{name: "data file function has no directory", data: map[string]any{"a": "{{ file('x') }}"}, msg: "data.a: ", is: template.ErrNoDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Resolve(tt.data, tt.hierarchy, tt.overrides, facts, nil)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.msg)
			if tt.is != nil {
				require.True(t, errors.Is(err, tt.is), "%v", err)
			}
			if tt.as != nil {
				require.ErrorAs(t, err, tt.as)
			}
		})
	}
}

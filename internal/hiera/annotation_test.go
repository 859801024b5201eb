package hiera

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

const annotated = `hierarchy:
  order: [default]
data:
  # The username to run the process as
  # @require
  user: bob

  # @validate isShellSafe(value)
  command: "/usr/bin/thing"

  # @require
  # @validate isIPv4(value)
  listen_address: 10.0.0.1

  port: 8080 # @validate isInt(value) && int(value) < 65536
  web:
    # @required
    # @validate isHostname(value)
    # @validate isFQDN(value)
    host: www.example.com
    # @requird
    tls: true
  packages: # @require
    # @require
    - nginx
  # No annotations
  debug: false
overrides:
  default:
    # @require
    ignored: x
`

func TestAnnotations(t *testing.T) {
	t.Parallel()
	got, err := Annotations([]byte(annotated))
	require.NoError(t, err)
	require.Equal(t, []Annotation{
		{Key: "user", Line: 6, Required: true},
		{Key: "command", Line: 9, Validate: []string{"isShellSafe(value)"}},
		{Key: "listen_address", Line: 13, Required: true, Validate: []string{"isIPv4(value)"}},
		{Key: "port", Line: 15, Validate: []string{"isInt(value) && int(value) < 65536"}},
		{Key: "web.host", Line: 20, Required: true, Validate: []string{"isHostname(value)", "isFQDN(value)"}},
		{Key: "web.tls", Line: 22, Unknown: []string{"@requird"}},
		{Key: "packages", Line: 23, Required: true},
	}, got)
}

func TestAnnotationsEdges(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"no data":        "resources: []\n",
		"empty document": "",
		"data is a list": "data: [a]\n",
		"scalar doc":     "just text\n",
	} {
		got, err := Annotations([]byte(src))
		require.NoError(t, err, name)
		require.Empty(t, got, name)
	}
	_, err := Annotations([]byte("data:\n  a: [\n"))
	require.ErrorContains(t, err, "hiera: annotations: yaml: line")
}

func TestCheck(t *testing.T) {
	t.Parallel()
	anns, err := Annotations([]byte(annotated))
	require.NoError(t, err)
	valid := map[string]any{
		"user": "bob", "command": "/usr/bin/thing", "listen_address": "10.0.0.1", "port": 8080,
		"web": map[string]any{"host": "www.example.com", "tls": true}, "packages": []any{"nginx"},
	}
	require.NoError(t, Check(valid, anns))

	with := func(k string, v any) map[string]any {
		d := Override(valid, map[string]any{})
		if k == "web.host" {
			d["web"].(map[string]any)["host"] = v
		} else {
			d[k] = v
		}
		return d
	}
	without := func(k string) map[string]any {
		d := Override(valid, map[string]any{})
		delete(d, k)
		return d
	}
	tests := []struct {
		name string
		data map[string]any
		want []string
	}{
		{"required missing", without("user"), []string{"data.user (line 6): @require: a value is required"}},
		{"required empty string", with("user", ""), []string{`data.user (line 6): @require: a value is required, got ""`}},
		{"required null", with("user", nil), []string{"data.user (line 6): @require: a value is required, got <nil>"}},
		{"required false is a value", with("user", false), nil},
		{"required zero is a value", with("user", 0), nil},
		{"required list present", with("packages", []any{}), nil},
		{"required then validate fails", with("listen_address", "::1"), []string{`data.listen_address (line 13): @validate isIPv4(value): "::1" is not valid`}},
		{"required missing skips validate", without("listen_address"), []string{"data.listen_address (line 13): @require: a value is required"}},
		{"shell unsafe", with("command", "rm -rf / ; echo"), []string{`data.command (line 9): @validate isShellSafe(value): "rm -rf / ; echo" is not valid`}},
		{"shell unsafe backtick", with("command", "`id`"), []string{"data.command (line 9): @validate isShellSafe(value)"}},
		{"int expression over range", with("port", 70000), []string{`data.port (line 15): @validate isInt(value) && int(value) < 65536: "70000" is not valid`}},
		{"int from string", with("port", "443"), nil},
		{"not an int short-circuits", with("port", "http"), []string{`data.port (line 15): @validate isInt(value) && int(value) < 65536: "http" is not valid`}},
		{"hostname not fqdn fails only fqdn", with("web.host", "www"), []string{`data.web.host (line 20): @validate isFQDN(value): "www" is not valid`}},
		{"bad hostname fails both", with("web.host", "-bad-.com"), []string{
			`data.web.host (line 20): @validate isHostname(value): "-bad-.com" is not valid`,
			`data.web.host (line 20): @validate isFQDN(value): "-bad-.com" is not valid`}},
		{"validate skipped on maps", with("command", map[string]any{"a": 1}), nil},
		{"validate skipped on lists", with("command", []any{";"}), nil},
		{"several violations at once", with("user", ""), []string{"data.user (line 6)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := Check(tt.data, anns)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrAnnotation))
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
			var ae *AnnotationError
			require.ErrorAs(t, err, &ae)
		})
	}
}

func TestValidators(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr, value string
		ok          bool
	}{
		{"isIP(value)", "10.1.1.1", true},
		{"is_ip(value)", "fe80::1", true},
		{"isIP(value)", "10.1.1", false},
		{"isIPv4(value)", "192.168.0.1", true},
		{"is_ipv4(value)", "::ffff:1.2.3.4", false},
		{"isIPv6(value)", "2001:db8::1", true},
		{"is_ipv6(value)", "1.2.3.4", false},
		{"isInt(value)", "-12", true},
		{"is_int(value)", "1.5", false},
		{"isFloat(value)", "1.5", true},
		{"is_float(value)", "x", false},
		{"isDuration(value)", "1h30m", true},
		{"is_duration(value)", "2d", true},
		{"isDuration(value)", "1w", true},
		{"isDuration(value)", "soon", false},
		{`isRegex(value, "^[a-z]+$")`, "abc", true},
		{`is_regex(value, "^[a-z]+$")`, "ab1", false},
		{"isShellSafe(value)", "/usr/bin/thing --flag=1", true},
		{"is_shellsafe(value)", "a && b", false},
		{"is_shellsafe(value)", "$(id)", false},
		{"isHostname(value)", "web-01", true},
		{"is_hostname(value)", "web_01", false},
		{"isFQDN(value)", "web.example.com.", true},
		{"is_fqdn(value)", "web", false},
		{"isIPv4(value) || isIPv6(value)", "::1", true},
	}
	for _, tt := range tests {
		msg := validate(tt.expr, tt.value)
		require.Equal(t, tt.ok, msg == "", "%s on %q: %s", tt.expr, tt.value, msg)
	}
	require.Contains(t, validate(`isRegex(value, "[")`, "x"), "invalid expression")
	require.Equal(t, `expression returned string, not a bool`, validate(`value`, "x"))
	require.Contains(t, validate(`isNope(value)`, "x"), "invalid expression")
}

func TestParseAssignments(t *testing.T) {
	t.Parallel()
	got, err := ParseAssignments([]string{
		"env=prod", "port=8080", "tls=true", "ratio=0.5", "list=[a, b]", "empty=", "nil=null",
		"web.host=www", "web.port=443", "text=a: b", "quoted='8080'", "eq=a=b",
	})
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"env": "prod", "port": 8080, "tls": true, "ratio": 0.5, "list": []any{"a", "b"}, "empty": nil, "nil": nil,
		"web": map[string]any{"host": "www", "port": 443}, "text": "a: b", "quoted": "8080", "eq": "a=b",
	}, got)

	for _, bad := range []struct{ in, msg string }{
		{"novalue", `hiera: malformed assignment "novalue": write key=value`},
		{"=x", `hiera: malformed assignment "=x": write key=value`},
		{"a..b=1", "empty key segment"},
		{"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.aa.bb.cc.dd.ee.ff.gg=1", "deeper than 32 levels"},
	} {
		_, err := ParseAssignments([]string{bad.in})
		require.ErrorIs(t, err, ErrAssignment)
		require.ErrorContains(t, err, bad.msg)
	}
	_, err = ParseAssignments([]string{"a=1", "a.b=2"})
	require.ErrorContains(t, err, `"a.b=2": a already holds a value`)
	// Exactly at the depth limit.
	deep := "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.aa.bb.cc.dd.ee.ff=1"
	got, err = ParseAssignments([]string{deep})
	require.NoError(t, err)
	require.Contains(t, got, "a")
}

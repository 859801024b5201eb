package schemas

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func res(typ, name string, mod ...func(*Resource)) Resource {
	r := Resource{Type: typ, Name: name, Pos: Position{File: "m.yaml", Line: 1}, Path: typ + ":" + name}
	for _, f := range mod {
		f(&r)
	}
	return r
}

func alias(a string) func(*Resource)          { return func(r *Resource) { r.Alias = a } }
func requires(refs ...string) func(*Resource) { return func(r *Resource) { r.Require = refs } }
func subscribes(refs ...string) func(*Resource) {
	return func(r *Resource) { r.Subscribe = refs }
}

func TestCheckReferences(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		ordering Ordering
		res      []Resource
		want     []string // messages; nil means valid
	}{
		{
			name: "valid earlier references by name and alias",
			res: []Resource{
				res("file", "/etc/app.conf", alias("conf")),
				res("exec", "reload", requires("file#/etc/app.conf"), subscribes("file#conf")),
			},
		},
		{
			name: "same name in different types is fine",
			res:  []Resource{res("file", "x"), res("exec", "x")},
		},
		{
			name: "duplicate name",
			res:  []Resource{res("file", "x"), res("file", "x")},
			want: []string{"duplicate resource file#x: already declared at m.yaml:1 (file:x)"},
		},
		{
			name: "alias clashes with a name",
			res:  []Resource{res("file", "x"), res("file", "y", alias("x"))},
			want: []string{"duplicate alias file#x: already declared at m.yaml:1 (file:x)"},
		},
		{
			name: "name clashes with an alias",
			res:  []Resource{res("file", "y", alias("x")), res("file", "x")},
			want: []string{"duplicate resource file#x: already the alias of file#y at m.yaml:1 (file:y)"},
		},
		{
			name: "unknown reference with suggestion",
			res:  []Resource{res("file", "/etc/app.conf"), res("exec", "r", requires("file#/etc/app.cnf"))},
			want: []string{`require file#/etc/app.cnf: unknown resource (did you mean "file#/etc/app.conf"?)`},
		},
		{
			name: "later reference with ordering manifest",
			res:  []Resource{res("exec", "r", subscribes("file#x")), res("file", "x")},
			want: []string{"subscribe file#x points to a later resource; with ordering: manifest resources run in declaration order (move it, or use ordering: graph)"},
		},
		{
			name:     "later reference with ordering graph",
			ordering: OrderingGraph,
			res:      []Resource{res("exec", "r", subscribes("file#x")), res("file", "x")},
		},
		{
			name:     "self require",
			ordering: OrderingGraph,
			res:      []Resource{res("exec", "r", alias("again"), requires("exec#again"))},
			want:     []string{"require exec#again: a resource cannot require itself"},
		},
		{
			name: "not a reference",
			res:  []Resource{res("exec", "r", requires("x"))},
			want: []string{`require "x" is not a reference; write type#name or type#alias`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := &Manifest{Ordering: tt.ordering, Resources: tt.res}
			if m.Ordering == "" {
				m.Ordering = OrderingManifest
			}
			err := CheckReferences(m)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			var errs Errors
			require.True(t, errors.As(err, &errs))
			got := make([]string, len(errs))
			for i, e := range errs {
				got[i] = e.Message
				require.Equal(t, Position{File: "m.yaml", Line: 1}, e.Pos)
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestLookupAndIndex(t *testing.T) {
	t.Parallel()
	m := &Manifest{Resources: []Resource{
		res("file", "/etc/app.conf", alias("conf")),
		res("exec", "conf"),
		res("exec", "reload", alias("/etc/app.conf")),
	}}
	tests := []struct {
		ref  string
		want int
		ok   bool
	}{
		{"file#/etc/app.conf", 0, true},
		{"file#conf", 0, true},
		{"exec#conf", 1, true},
		{"exec#reload", 2, true},
		{"exec#/etc/app.conf", 2, true},
		{"file#reload", -1, false},
		{"reload", -1, false},
	}
	index := m.Index()
	for _, tt := range tests {
		i, ok := m.Lookup(tt.ref)
		require.Equal(t, tt.ok, ok, tt.ref)
		require.Equal(t, tt.want, i, tt.ref)
		j, ok := index[tt.ref]
		require.Equal(t, tt.ok, ok, tt.ref)
		if ok {
			require.Equal(t, tt.want, j, tt.ref)
		}
	}
}

func TestIsTemplate(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"/etc/motd": false, "{{ lookup('x') }}": true, "a${ x }": true, "$HOME": false,
	} {
		require.Equal(t, want, IsTemplate(s), s)
	}
}

// Path names are cleaned before they identify a resource: four spellings
// of one path are one resource declared four times, and a reference
// spelled differently still finds it. Control characters in names are
// refused.
func TestNamesCleanedBeforeIdentity(t *testing.T) {
	t.Parallel()
	m := &Manifest{Ordering: OrderingGraph, Resources: []Resource{
		res("file", "/out/x"), res("file", "/out/./x"), res("file", "//out/x"), res("file", "/out/../out/x"),
	}}
	for i := range m.Resources {
		m.Resources[i].Pos.Line = i + 1
	}
	err := CheckReferences(m)
	require.Error(t, err)
	require.Equal(t, 3, strings.Count(err.Error(), "duplicate resource file#/out/x"), err.Error())

	m = &Manifest{Ordering: OrderingGraph, Resources: []Resource{
		res("file", "/etc/app//app.conf"),
		res("exec", "reload", requires("file#/etc/./app/app.conf")),
	}}
	require.NoError(t, CheckReferences(m))
	require.Equal(t, "/etc/app/app.conf", m.Resources[0].Name)
	require.Equal(t, []string{"file#/etc/app/app.conf"}, m.Resources[1].Require)

	for _, name := range []string{"/out/a\nb", "/out/a\x00b", "echo hi\r"} {
		typ := "file"
		if name[0] != '/' {
			typ = "exec"
		}
		err := CheckReferences(&Manifest{Resources: []Resource{res(typ, name)}})
		require.ErrorContains(t, err, "contains the control character", name)
	}
}

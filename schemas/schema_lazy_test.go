package schemas

import (
	"io/fs"
	"slices"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"github.com/stretchr/testify/require"
)

// fullBuild compiles every embedded file as one instance: the schema as
// it was built before types were built on demand.
func fullBuild(t testing.TB) (cue.Value, *schemaLayout) {
	t.Helper()
	l, err := layoutOnce()
	require.NoError(t, err)
	names, err := fs.Glob(schemaFS, "*.cue")
	require.NoError(t, err)
	v, err := l.build(cuecontext.New(), names...)
	require.NoError(t, err)
	return v, l
}

// Each type built on its own (its file, common.cue and what it
// references) has the same fields, kinds and exclusive groups as in the
// whole schema, and the types are those the whole schema registers.
func TestTypesBuiltAloneMatchTheWholeSchema(t *testing.T) {
	whole, l := fullBuild(t)
	it, err := whole.LookupPath(cue.MakePath(cue.Def("types"))).Fields()
	require.NoError(t, err)
	var names []string
	for it.Next() {
		names = append(names, it.Selector().Unquoted())
	}
	slices.Sort(names)
	require.Equal(t, names, l.names)
	require.Contains(t, names, "file")
	require.Contains(t, names, "user")

	var ex map[string][][]string
	require.NoError(t, whole.LookupPath(cue.MakePath(cue.Def("exclusive"))).Decode(&ex))
	s, err := newSchema()
	require.NoError(t, err)
	for _, typ := range names {
		want, err := fields(whole.LookupPath(cue.MakePath(cue.Def("types"), cue.Str(typ))))
		require.NoError(t, err)
		def, ok := s.def(typ)
		require.True(t, ok, "%s: %v", typ, s.failed[typ])
		got, err := fields(def)
		require.NoError(t, err)
		require.Equal(t, want, got, typ)
		require.Equal(t, ex[typ], s.exclusiveOf(typ), typ)
	}
	require.NotEmpty(t, s.exclusiveOf("file"), "file's content and source exclude each other")
}

// A schema builds no type until one is asked for, then only that one
// (with the files it references: user needs group's account fields).
func TestTypesBuiltOnDemand(t *testing.T) {
	s, err := newSchema()
	require.NoError(t, err)
	require.Empty(t, s.types)
	require.True(t, s.isType("file"))
	require.False(t, s.isType("nosuch"))
	require.Empty(t, s.types, "isType builds nothing")

	_, ok := s.def("file")
	require.True(t, ok)
	require.Len(t, s.types, 1)
	_, ok = s.def("nosuch")
	require.False(t, ok)

	require.Equal(t, []string{"group.cue"}, s.layout.needs["user"])
	require.Empty(t, s.layout.needs["file"])
	_, ok = s.def("user")
	require.True(t, ok)
	require.Len(t, s.types, 2)
}

// The schema a manifest of files and an exec needs, against all of it
// (BenchmarkNewSchema*: 1.6 ms for every type before they were built on
// demand).
func BenchmarkNewSchemaFileExec(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		s, err := newSchema()
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := s.def("file"); !ok {
			b.Fatal("file")
		}
		if _, ok := s.def("exec"); !ok {
			b.Fatal("exec")
		}
	}
}

func BenchmarkNewSchemaAllTypes(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		s, err := newSchema()
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range s.typeNames() {
			if _, ok := s.def(t); !ok {
				b.Fatal(t)
			}
		}
	}
}

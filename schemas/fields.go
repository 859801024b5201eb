package schemas

import (
	"fmt"
	"slices"

	"cuelang.org/go/cue"
)

// Field is one property of a resource type's CUE definition.
type Field struct {
	// Name is the property name as written in manifests.
	Name string
	// Kinds are the kinds of value the field accepts, sorted: "bool",
	// "bytes", "float", "int", "list", "null", "string", "struct". A field
	// that takes a template as well as a bool lists both "bool" and
	// "string"; a field that takes anything lists them all.
	Kinds []string
	// Common is true for the fields of #Common, shared by every type.
	Common bool
}

// TypeFields returns the fields of type typ's definition in #types (its
// optional and required ones included) in the order the definition
// declares them, #Common's marked Common. An unknown type is an error.
//
// It exists so that a test can hold each type's Go properties struct to its
// CUE definition, field by field.
func TypeFields(typ string) ([]Field, error) {
	s, err := newSchema()
	if err != nil {
		return nil, err
	}
	def, ok := s.def(typ)
	if !ok {
		return nil, fmt.Errorf("schemas: unknown resource type %q", typ)
	}
	common, err := fields(s.root.LookupPath(cue.MakePath(cue.Def("Common"))))
	if err != nil {
		return nil, fmt.Errorf("schemas: #Common: %w", err)
	}
	out, err := fields(def)
	if err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", typ, err)
	}
	for i := range out {
		out[i].Common = slices.ContainsFunc(common, func(c Field) bool { return c.Name == out[i].Name })
	}
	return out, nil
}

func fields(v cue.Value) ([]Field, error) {
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil, err
	}
	var out []Field
	for it.Next() {
		out = append(out, Field{Name: it.Selector().Unquoted(), Kinds: kindNames(it.Value().IncompleteKind())})
	}
	return out, nil
}

var kinds = []struct {
	k    cue.Kind
	name string
}{
	{cue.BoolKind, "bool"}, {cue.BytesKind, "bytes"}, {cue.FloatKind, "float"}, {cue.IntKind, "int"},
	{cue.ListKind, "list"}, {cue.NullKind, "null"}, {cue.StringKind, "string"}, {cue.StructKind, "struct"},
}

func kindNames(k cue.Kind) []string {
	var names []string
	for _, kn := range kinds {
		if k&kn.k != 0 {
			names = append(names, kn.name)
		}
	}
	return names
}

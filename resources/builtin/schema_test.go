package builtin

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/schemas"
)

// specFields are declared by each type's CUE definition but travel in
// resources.Spec, not in the properties struct.
var specFields = []string{"ensure", "provider"}

// TestPropertiesMatchSchema holds every registered type's Go properties
// struct to its CUE definition in schemas/*.cue, field by field: each CUE
// field (other than #Common's, ensure and provider) is a json tag of the
// struct, each json tag is a CUE field, and their kinds agree. A new type is
// checked as soon as it is registered.
func TestPropertiesMatchSchema(t *testing.T) {
	t.Parallel()
	reg := Registry()
	for _, typ := range reg.Types() {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			pt := reg.PropertiesType(typ)
			if pt == nil {
				t.Fatalf("type %q is registered without resources.WithProperties: its schema cannot be checked", typ)
			}
			cueFields, err := schemas.TypeFields(typ)
			if err != nil {
				t.Fatalf("no CUE definition: %v", err)
			}
			goFields := jsonFields(t, pt)
			cueByName := map[string]schemas.Field{}
			for _, f := range cueFields {
				if f.Common || slices.Contains(specFields, f.Name) {
					continue
				}
				cueByName[f.Name] = f
				if _, ok := goFields[f.Name]; !ok {
					t.Errorf("CUE field %q has no json tag in %s", f.Name, pt)
				}
			}
			for name, ft := range goFields {
				f, ok := cueByName[name]
				if !ok {
					t.Errorf("%s field %q (json) is not in the CUE definition of %s", pt, name, typ)
					continue
				}
				if want := cueKinds(ft); want != nil && !slices.ContainsFunc(want, func(k string) bool { return slices.Contains(f.Kinds, k) }) {
					t.Errorf("field %q: Go %s wants CUE kind %v, the definition allows %v", name, ft, want, f.Kinds)
				}
			}
		})
	}
}

// jsonFields returns the json names of t's fields, embedded structs
// flattened, with their types.
func jsonFields(tb testing.TB, t reflect.Type) map[string]reflect.Type {
	tb.Helper()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		tb.Fatalf("properties type %s is not a struct", t)
	}
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			for n, ft := range jsonFields(tb, f.Type) {
				out[n] = ft
			}
			continue
		}
		if name == "" {
			tb.Errorf("%s.%s has no json tag", t, f.Name)
			continue
		}
		out[name] = f.Type
	}
	return out
}

// cueKinds returns the CUE kinds a Go type decodes from; nil means any.
func cueKinds(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return []string{"string"}
	case reflect.Bool:
		return []string{"bool"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return []string{"int"}
	case reflect.Float32, reflect.Float64:
		return []string{"float", "int"}
	case reflect.Slice, reflect.Array:
		return []string{"list"}
	case reflect.Map, reflect.Struct:
		return []string{"struct"}
	default:
		return nil
	}
}

// TestSchemaDriftIsCaught proves the check above fails on the drift it is
// for: a Go field the CUE definition lacks, and a kind mismatch.
func TestSchemaDriftIsCaught(t *testing.T) {
	t.Parallel()
	type drifted struct {
		Content string `json:"content"`
		Mode    int    `json:"mode"`
		Extra   string `json:"extra"`
	}
	got := jsonFields(t, reflect.TypeOf(drifted{}))
	cueFields, err := schemas.TypeFields("file")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]schemas.Field{}
	for _, f := range cueFields {
		byName[f.Name] = f
	}
	if _, ok := byName["extra"]; ok {
		t.Fatal("file.cue has a field named extra; pick another")
	}
	mode := byName["mode"]
	if slices.ContainsFunc(cueKinds(got["mode"]), func(k string) bool { return slices.Contains(mode.Kinds, k) }) {
		t.Fatalf("an int mode would pass against CUE kinds %v", mode.Kinds)
	}
}

package schemas

import (
	"slices"
	"testing"
)

func TestTypeFields(t *testing.T) {
	t.Parallel()
	got, err := TypeFields("exec")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Field{}
	for _, f := range got {
		byName[f.Name] = f
	}
	for name, want := range map[string]Field{
		"name":        {Name: "name", Kinds: []string{"string"}, Common: true},
		"retry":       {Name: "retry", Kinds: []string{"int"}, Common: true},
		"require":     {Name: "require", Kinds: []string{"list"}, Common: true},
		"command":     {Name: "command", Kinds: []string{"string"}},
		"refreshonly": {Name: "refreshonly", Kinds: []string{"bool", "string"}},
		"returns":     {Name: "returns", Kinds: []string{"list", "string"}},
		"environment": {Name: "environment", Kinds: []string{"list"}},
	} {
		f, ok := byName[name]
		if !ok {
			t.Errorf("field %q missing from %v", name, got)
			continue
		}
		if f.Name != want.Name || f.Common != want.Common || !slices.Equal(f.Kinds, want.Kinds) {
			t.Errorf("field %q = %+v, want %+v", name, f, want)
		}
	}
	if _, err := TypeFields("nosuch"); err == nil {
		t.Fatal("unknown type accepted")
	}
}

package schemas

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/parser"
)

//go:embed *.cue
var schemaFS embed.FS

// schema is the compiled embedded schema in one cue.Context. Values of
// different contexts cannot be combined, so each Parse builds its own (a
// context keeps memory for as long as it lives).
type schema struct {
	ctx       *cue.Context
	root      cue.Value
	manifest  cue.Value
	types     map[string]cue.Value
	exclusive map[string][][]string
}

// newSchema compiles the embedded schema files into a fresh context.
func newSchema() (*schema, error) {
	ctx := cuecontext.New()
	inst := build.NewContext().NewInstance("", nil)
	names, err := fs.Glob(schemaFS, "*.cue")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		src, err := schemaFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(name, src, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("schemas: parse embedded %s: %w", name, err)
		}
		if err := inst.AddSyntax(f); err != nil {
			return nil, fmt.Errorf("schemas: add embedded %s: %w", name, err)
		}
	}
	v := ctx.BuildInstance(inst)
	if err := v.Err(); err != nil {
		return nil, fmt.Errorf("schemas: build embedded schema: %w", err)
	}
	s := &schema{
		ctx:       ctx,
		root:      v,
		manifest:  v.LookupPath(cue.MakePath(cue.Def("Manifest"))),
		types:     map[string]cue.Value{},
		exclusive: map[string][][]string{},
	}
	it, err := v.LookupPath(cue.MakePath(cue.Def("types"))).Fields()
	if err != nil {
		return nil, fmt.Errorf("schemas: embedded #types: %w", err)
	}
	for it.Next() {
		s.types[it.Selector().Unquoted()] = it.Value()
	}
	ex := v.LookupPath(cue.MakePath(cue.Def("exclusive")))
	if err := ex.Decode(&s.exclusive); err != nil {
		return nil, fmt.Errorf("schemas: embedded #exclusive: %w", err)
	}
	return s, nil
}

// typeNames returns the schema's resource types, sorted.
func (s *schema) typeNames() []string {
	names := make([]string, 0, len(s.types))
	for name := range s.types {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

var sharedTypes = sync.OnceValues(func() ([]string, error) {
	s, err := newSchema()
	if err != nil {
		return nil, err
	}
	return s.typeNames(), nil
})

// Types returns the known resource types, sorted: the entries of the
// schema's #types.
func Types() []string {
	names, err := sharedTypes()
	if err != nil {
		// The schema is embedded and tested; failing to build it is a bug.
		panic(err)
	}
	return slices.Clone(names)
}

// Files returns the embedded CUE schema files by name ("file.cue" → its
// text), for `manifold schema` to print.
func Files() map[string]string {
	names, _ := fs.Glob(schemaFS, "*.cue")
	files := make(map[string]string, len(names))
	for _, name := range names {
		b, _ := schemaFS.ReadFile(name)
		files[name] = string(b)
	}
	return files
}

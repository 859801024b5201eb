package schemas

import (
	"bytes"
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
//
// Only #Common and #Manifest (common.cue, manifest.cue) are built with the
// schema; a type's definition is built the first time a manifest names
// the type (def), from its own file, common.cue and the files defining
// what it references (schemaLayout). A process applying files and an
// exec built all thirteen files: 3.4 ms of the 33 ms of CPU of a 1-file
// apply (BenchmarkNewSchema: 1.6 ms warm for all, 0.7 ms for four).
type schema struct {
	ctx      *cue.Context
	root     cue.Value
	manifest cue.Value
	layout   *schemaLayout

	types     map[string]cue.Value
	exclusive map[string][][]string
	failed    map[string]error
}

// schemaLayout says which embedded file registers each type in #types and
// which other files its definitions need. It is read from the files' text
// once per process.
type schemaLayout struct {
	names []string            // types, sorted
	file  map[string]string   // type → its file
	needs map[string][]string // type → files its file references, besides common.cue
	src   map[string][]byte   // file → text
}

// The files every build holds: the shared definitions and the manifest's.
const (
	commonFile   = "common.cue"
	manifestFile = "manifest.cue"
)

var layoutOnce = sync.OnceValues(readLayout)

func readLayout() (*schemaLayout, error) {
	names, err := fs.Glob(schemaFS, "*.cue")
	if err != nil {
		return nil, err
	}
	l := &schemaLayout{file: map[string]string{}, needs: map[string][]string{}, src: map[string][]byte{}}
	definedIn := map[string]string{}
	for _, name := range names {
		src, err := schemaFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		l.src[name] = src
		for _, d := range layoutLines(src, false) {
			if d == "#types" || d == "#exclusive" {
				continue
			}
			if other, ok := definedIn[d]; ok && other != name {
				return nil, fmt.Errorf("schemas: %s defined in %s and %s", d, other, name)
			}
			definedIn[d] = name
		}
	}
	for _, name := range names {
		for _, t := range layoutLines(l.src[name], true) {
			if other, ok := l.file[t]; ok && other != name {
				return nil, fmt.Errorf("schemas: type %s registered in %s and %s", t, other, name)
			}
			l.file[t] = name
		}
	}
	for t, name := range l.file {
		seen := map[string]bool{name: true, commonFile: true}
		var needs []string
		var walk func(string)
		walk = func(f string) {
			for _, r := range defRefs(l.src[f]) {
				dep, ok := definedIn[r]
				if !ok || seen[dep] {
					continue
				}
				seen[dep] = true
				needs = append(needs, dep)
				walk(dep)
			}
		}
		walk(name)
		slices.Sort(needs)
		l.needs[t] = needs
		l.names = append(l.names, t)
	}
	slices.Sort(l.names)
	return l, nil
}

// The layout is read with byte scanners rather than regular expressions:
// the multi-line ones took 0.5 ms of every apply and validate (perf of a
// 1-file apply) on the schemas' 60 kB. TestLayoutScannersMatchRegexps
// holds them to the expressions they replace:
//
//	layoutLines(src, false): (?m)^(#[A-Za-z_][A-Za-z0-9_]*)\s*:
//	layoutLines(src, true):  (?m)^#types:\s*([A-Za-z_][A-Za-z0-9_]*)\s*:
//	defRefs(src):            #[A-Z][A-Za-z0-9_]*

// layoutLines returns, in order, the definitions declared at the start
// of a line ("#Name:"), or with types the type names registered there
// ("#types: name:").
func layoutLines(src []byte, types bool) []string {
	var out []string
	for i := 0; i < len(src); {
		if src[i] == '#' {
			if m, next, ok := layoutLine(src, i, types); ok {
				out = append(out, m)
				i = lineStart(src, next)
				continue
			}
		}
		i = lineStart(src, i+1)
	}
	return out
}

// lineStart is the first line start at or after at.
func lineStart(src []byte, at int) int {
	if at == 0 || at >= len(src) || src[at-1] == '\n' {
		return at
	}
	if nl := bytes.IndexByte(src[at:], '\n'); nl >= 0 {
		return at + nl + 1
	}
	return len(src)
}

// layoutLine matches one layoutLines expression at src[i] ('#' at a
// line's start): the captured name and where the match ends.
func layoutLine(src []byte, i int, types bool) (string, int, bool) {
	j := i
	if types {
		const prefix = "#types:"
		if !bytes.HasPrefix(src[i:], []byte(prefix)) {
			return "", 0, false
		}
		j = skipSpace(src, i+len(prefix))
	} else {
		j++ // the '#', captured
	}
	start := j
	if j >= len(src) || !identStart(src[j]) {
		return "", 0, false
	}
	for j++; j < len(src) && identByte(src[j]); j++ {
	}
	name := src[start:j]
	if !types {
		name = src[i:j]
	}
	j = skipSpace(src, j)
	if j >= len(src) || src[j] != ':' {
		return "", 0, false
	}
	return string(name), j + 1, true
}

// defRefs returns every "#Name" in src whose name starts upper case, in
// order, as the leftmost-first matches of #[A-Z][A-Za-z0-9_]*.
func defRefs(src []byte) []string {
	var out []string
	for i := 0; i < len(src); {
		k := bytes.IndexByte(src[i:], '#')
		if k < 0 {
			break
		}
		i += k
		if i+1 < len(src) && src[i+1] >= 'A' && src[i+1] <= 'Z' {
			j := i + 2
			for j < len(src) && identByte(src[j]) {
				j++
			}
			out = append(out, string(src[i:j]))
			i = j
			continue
		}
		i++
	}
	return out
}

// skipSpace skips \s (RE2's: tab, newline, form feed, carriage return,
// space).
func skipSpace(src []byte, j int) int {
	for j < len(src) {
		switch src[j] {
		case '\t', '\n', '\f', '\r', ' ':
			j++
		default:
			return j
		}
	}
	return j
}

func identStart(c byte) bool { return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }

func identByte(c byte) bool { return identStart(c) || c >= '0' && c <= '9' }

// build compiles the named embedded files as one instance of ctx.
func (l *schemaLayout) build(ctx *cue.Context, files ...string) (cue.Value, error) {
	inst := build.NewContext().NewInstance("", nil)
	for _, name := range files {
		f, err := parser.ParseFile(name, l.src[name], parser.ParseComments)
		if err != nil {
			return cue.Value{}, fmt.Errorf("schemas: parse embedded %s: %w", name, err)
		}
		if err := inst.AddSyntax(f); err != nil {
			return cue.Value{}, fmt.Errorf("schemas: add embedded %s: %w", name, err)
		}
	}
	v := ctx.BuildInstance(inst)
	if err := v.Err(); err != nil {
		return cue.Value{}, fmt.Errorf("schemas: build embedded schema: %w", err)
	}
	return v, nil
}

// buildIn compiles one embedded file with the identifiers it does not
// declare resolved in scope.
func (l *schemaLayout) buildIn(ctx *cue.Context, scope cue.Value, file string) (cue.Value, error) {
	f, err := parser.ParseFile(file, l.src[file], parser.ParseComments)
	if err != nil {
		return cue.Value{}, fmt.Errorf("schemas: parse embedded %s: %w", file, err)
	}
	v := ctx.BuildFile(f, cue.Scope(scope))
	if err := v.Err(); err != nil {
		return cue.Value{}, fmt.Errorf("schemas: build embedded %s: %w", file, err)
	}
	return v, nil
}

// newSchema compiles the shared and the manifest's definitions into a
// fresh context; types are built when first asked for (def).
func newSchema() (*schema, error) {
	l, err := layoutOnce()
	if err != nil {
		return nil, err
	}
	ctx := cuecontext.New()
	v, err := l.build(ctx, commonFile, manifestFile)
	if err != nil {
		return nil, err
	}
	return &schema{
		ctx:      ctx,
		root:     v,
		manifest: v.LookupPath(cue.MakePath(cue.Def("Manifest"))),
		layout:   l,
	}, nil
}

// isType reports whether name is a resource type, building nothing.
func (s *schema) isType(name string) bool {
	_, ok := s.layout.file[name]
	return ok
}

// def returns type name's closed definition, built on first use; false
// for an unknown type. The embedded schema is tested: a type that fails
// to build is a bug, reported as unknown with the error kept for tests.
func (s *schema) def(name string) (cue.Value, bool) {
	if v, ok := s.types[name]; ok {
		return v, true
	}
	file, ok := s.layout.file[name]
	if !ok || s.failed[name] != nil {
		return cue.Value{}, false
	}
	var v cue.Value
	var err error
	if needs := s.layout.needs[name]; len(needs) == 0 {
		// The type's file alone, its references to the shared
		// definitions resolved in the schema's root: common.cue is not
		// compiled again.
		v, err = s.layout.buildIn(s.ctx, s.root, file)
	} else {
		v, err = s.layout.build(s.ctx, append(append([]string{commonFile}, needs...), file)...)
	}
	var ex map[string][][]string
	if err == nil {
		err = v.LookupPath(cue.MakePath(cue.Def("exclusive"))).Decode(&ex)
	}
	d := v.LookupPath(cue.MakePath(cue.Def("types"), cue.Str(name)))
	if err == nil && !d.Exists() {
		err = fmt.Errorf("schemas: %s does not register type %s", file, name)
	}
	if err != nil {
		if s.failed == nil {
			s.failed = map[string]error{}
		}
		s.failed[name] = err
		return cue.Value{}, false
	}
	if s.types == nil {
		s.types, s.exclusive = map[string]cue.Value{}, map[string][][]string{}
	}
	s.types[name] = d
	s.exclusive[name] = ex[name]
	return d, true
}

// exclusiveOf returns type name's groups of mutually exclusive properties
// (its definition built).
func (s *schema) exclusiveOf(name string) [][]string {
	if _, ok := s.def(name); !ok {
		return nil
	}
	return s.exclusive[name]
}

// typeNames returns the schema's resource types, sorted.
func (s *schema) typeNames() []string { return slices.Clone(s.layout.names) }

// Types returns the known resource types, sorted: the entries of the
// schema's #types.
func Types() []string {
	l, err := layoutOnce()
	if err != nil {
		// The schema is embedded and tested; failing to build it is a bug.
		panic(err)
	}
	return slices.Clone(l.names)
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

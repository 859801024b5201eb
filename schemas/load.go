package schemas

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/token"
	cuejson "cuelang.org/go/encoding/json"
	cueyaml "cuelang.org/go/encoding/yaml"
)

// Load reads the manifest file at path and parses it with Parse. A file
// bigger than MaxManifestBytes is refused before it is parsed.
func Load(path string) (*Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("schemas: load manifest: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("schemas: load manifest %s: %w", path, err)
	}
	return Parse(path, src)
}

// Parse parses, validates and normalises a manifest. The format follows the
// file name's extension: .yaml and .yml are YAML, .json is JSON, .cue is
// evaluated as CUE (comprehensions and definitions allowed), anything else is
// tried as YAML. Problems in the document are returned as Errors naming
// file, line, column and field path; all of them, not just the first.
//
// When no resource name, alias or reference holds a template expression,
// Parse also runs CheckReferences; otherwise the caller renders them and
// calls CheckReferences itself.
func Parse(filename string, src []byte) (*Manifest, error) {
	m, err := ParseUnchecked(filename, src)
	if err != nil {
		return nil, err
	}
	if !hasTemplatedRefs(m) {
		if err := CheckReferences(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ParseUnchecked is Parse without the reference checks: for callers that
// check references themselves with CheckReferencesWith (child manifests
// may refer to resources of their ancestors).
func ParseUnchecked(filename string, src []byte) (*Manifest, error) {
	return parseCached(filename, src, true)
}

// ParseOnce is ParseUnchecked for a process that parses the manifest once
// (validate, render): a result already in the parse cache is used, but a
// new one is not stored there, which would copy its resources (6 MB and 6 %
// of the CPU of a 20,000-resource validate).
func ParseOnce(filename string, src []byte) (*Manifest, error) {
	return parseCached(filename, src, false)
}

func parseCached(filename string, src []byte, store bool) (*Manifest, error) {
	if len(src) > MaxManifestBytes {
		return nil, fmt.Errorf("%s: %w: larger than the limit of %d bytes (%d MiB)",
			filename, ErrManifestTooLarge, MaxManifestBytes, MaxManifestBytes>>20)
	}
	key := parseKey(filename, src)
	if m, err, ok := cachedParse(key); ok {
		return m, err
	}
	if CUEProbe != nil && strings.EqualFold(filepath.Ext(filename), ".cue") {
		if err := CUEProbe(filename, src); err != nil {
			if store {
				storeParse(key, nil, err)
			}
			return nil, err
		}
	}
	m, err := parseUnchecked(filename, src)
	if store {
		storeParse(key, m, err)
	}
	return m, err
}

func parseUnchecked(filename string, src []byte) (*Manifest, error) {
	s, err := newSchema()
	if err != nil {
		return nil, err
	}
	if fastPath && isYAMLName(filename) {
		if m, ok := parseFast(s, filename, src); ok {
			return m, nil
		}
	}
	p := &loader{s: s, filename: filename, empty: s.ctx.CompileString("{}")}
	doc, ok := p.document(src)
	if !ok {
		return nil, p.errs.err()
	}
	m := p.manifest(doc)
	if err := p.errs.sorted(); err != nil {
		return nil, err
	}
	return m, nil
}

// loader holds the state of one Parse.
type loader struct {
	s        *schema
	filename string
	empty    cue.Value
	errs     errorList
	// unknown holds the paths of fields already reported as not allowed, so
	// CUE's own closedness errors for them are dropped.
	unknown map[string]bool
	// shapes holds the first resource of each shape (see shapeKey), free
	// which fields of a type accept every value of a kind.
	shapes map[string]*shape
	free   map[freeKey]bool
	// keyBuf, freeBuf and fieldBuf are reused by shapeKeyOf and
	// resourceSub.
	keyBuf   []byte
	freeBuf  []scalarField
	fieldBuf []scalarField
	// defaults are the manifest-level defaults per type, checked.
	defaults map[string][]field
	// entries are the entries of the document's resources list, built
	// apart from it (detach.go); nil when they were not.
	entries []entry
	// sub, when not nil, are the entries of the resources list as the
	// subset reader read them (subset.go); the document then holds an
	// empty list. bail says the subset loader met something it leaves to
	// the full path.
	sub  []*ynode
	bail bool
	// tf holds the subset document's lines, for positions; scalars the
	// Go values of defaults fields.
	tf      *token.File
	scalars map[cue.Value]scalarField
	// lastDefaults are the scalars of the last defaults list
	// (defaultScalars); lastFree the last type's answers of unconstrained.
	lastDefaults cachedDefaults
	lastFree     freeOfType
	// streams are the block-shape entries whose items were made into
	// resources as they were read, by their sequence; streaming the one
	// being read.
	streams   map[*ynode]*streamedBlock
	streaming *streamedBlock
	// pathBuf is reused to make the paths of block items.
	pathBuf []byte
	// validated counts the resources validated with CUE.
	validated int
}

// document turns the source into a CUE value according to the format.
func (p *loader) document(src []byte) (cue.Value, bool) {
	var doc cue.Value
	switch strings.ToLower(filepath.Ext(p.filename)) {
	case ".json":
		expr, err := cuejson.Extract(p.filename, src)
		if err != nil {
			p.jsonSyntaxError(src, err)
			return doc, false
		}
		if s, ok := expr.(*ast.StructLit); ok && detachLists {
			p.entries = p.detachResources(s.Elts)
		}
		doc = p.s.ctx.BuildExpr(expr)
	case ".cue":
		doc = p.s.ctx.CompileBytes(src, cue.Filename(p.filename))
	default:
		f, err := cueyaml.Extract(p.filename, src)
		if err != nil {
			p.syntaxErrors(err)
			return doc, false
		}
		if detachLists {
			p.entries = p.detachResources(f.Decls)
		}
		doc = p.s.ctx.BuildFile(f)
	}
	if err := doc.Err(); err != nil {
		p.cueErrors(err, "", Position{File: p.filename}, cue.Value{}, cue.Value{})
		return doc, false
	}
	if k := doc.IncompleteKind(); k == cue.TopKind || k == cue.NullKind {
		// An empty file is a mistake (a truncated write, the wrong path),
		// not a run of nothing; `resources: []` says that deliberately.
		p.errs.addf(Position{File: p.filename}, "", "the manifest is empty (write `resources: []` for a manifest that does nothing)")
		return doc, false
	}
	if doc.IncompleteKind() != cue.StructKind {
		p.errs.addf(p.pos(doc.Pos(), Position{File: p.filename}), "",
			"a manifest must be a map with resources, data, ordering, ...; got %v", doc.IncompleteKind())
		return doc, false
	}
	return doc, true
}

// manifest checks the document's top level and normalises its resources.
func (p *loader) manifest(doc cue.Value) *Manifest {
	m := &Manifest{Path: p.filename, Ordering: OrderingManifest}
	filePos := Position{File: p.filename}
	list, path := doc.LookupPath(cue.ParsePath("resources")), "resources"
	if ccm := doc.LookupPath(cue.ParsePath("ccm.resources")); ccm.Exists() && !list.Exists() {
		list, path = ccm, "ccm.resources"
	}
	if list.IncompleteKind() == cue.ListKind {
		n := countResources(list)
		if p.entries != nil {
			n = countEntries(p.entries)
		}
		if p.sub != nil {
			n = countSub(p.sub) + p.streamedCount()
		}
		if n > MaxResources {
			p.errs.add(&Error{
				Pos:     p.pos(labelPos(list), filePos),
				Path:    path,
				Message: fmt.Sprintf("%d resources exceed the limit of %d per manifest; split it with apply resources", n, MaxResources),
				Err:     ErrTooManyResources,
			})
			return m
		}
	}

	// The top level is checked without the resources list, which is
	// checked entry by entry below.
	v, _, ok := p.build(p.s.manifest, doc, "", filePos, nil, []string{"resources"})
	if ok {
		var top struct {
			Data      map[string]any            `json:"data"`
			Hierarchy Hierarchy                 `json:"hierarchy"`
			Overrides map[string]map[string]any `json:"overrides"`
			Ordering  Ordering                  `json:"ordering"`
			Fail      *bool                     `json:"fail_on_error"`
			CCM       struct {
				Fail *bool `json:"fail_on_error"`
			} `json:"ccm"`
		}
		// Decode only the small sections; resources are walked below.
		for _, f := range []string{"data", "hierarchy", "overrides", "ordering", "fail_on_error", "ccm.fail_on_error"} {
			fv := v.LookupPath(cue.ParsePath(f))
			if !fv.Exists() {
				continue
			}
			var err error
			switch f {
			case "data":
				err = fv.Decode(&top.Data)
			case "hierarchy":
				err = fv.Decode(&top.Hierarchy)
			case "overrides":
				err = fv.Decode(&top.Overrides)
			case "ordering":
				err = fv.Decode(&top.Ordering)
			case "fail_on_error":
				err = fv.Decode(&top.Fail)
			case "ccm.fail_on_error":
				err = fv.Decode(&top.CCM.Fail)
			}
			if err != nil {
				p.errs.addf(p.pos(fv.Pos(), filePos), f, "%v", err)
			}
		}
		m.Data = normalize(top.Data).(map[string]any)
		m.Hierarchy = top.Hierarchy
		for _, o := range top.Overrides {
			normalize(o)
		}
		m.Overrides = top.Overrides
		m.Ordering = top.Ordering
		if top.Fail != nil && top.CCM.Fail != nil {
			fv := doc.LookupPath(cue.ParsePath("ccm.fail_on_error"))
			p.errs.addf(p.pos(labelPos(fv), filePos), "ccm.fail_on_error",
				"fail_on_error is set both at the top level and in ccm; set it in one place")
		}
		m.FailOnError = (top.Fail != nil && *top.Fail) || (top.CCM.Fail != nil && *top.CCM.Fail)
		p.manifestExtras(doc, v, m, filePos)
	}
	if m.ResourcesJetFile != "" && list.Exists() {
		p.errs.addf(p.pos(labelPos(list), filePos), path,
			"resources and resources_jet_file cannot be used together; list the resources in one place")
		return m
	}

	if ccm := doc.LookupPath(cue.ParsePath("ccm.resources")); ccm.Exists() && path == "resources" && list.Exists() {
		p.errs.addf(p.pos(labelPos(ccm), filePos), "ccm.resources",
			"resources are listed both at the top level and in ccm; list them in one place")
		return m
	}
	if !list.Exists() {
		return m
	}
	if list.IncompleteKind() != cue.ListKind {
		p.errs.addf(p.pos(list.Pos(), filePos), path, "resources must be a list, got %v", list.IncompleteKind())
		return m
	}
	if p.sub != nil {
		m.Resources = p.resourcesSub(p.sub, path)
		return m
	}
	m.Resources = p.resources(list, p.entries, path)
	return m
}

// field is one field of a document struct with where its label is.
type field struct {
	label string
	value cue.Value
	pos   Position
}

// fields lists v's regular fields in order.
func (p *loader) fields(v cue.Value) []field {
	it, err := v.Fields()
	if err != nil {
		return nil
	}
	var fs []field
	for it.Next() {
		sel := it.Selector()
		if sel.LabelType() != cue.StringLabel {
			continue
		}
		fv := it.Value()
		fs = append(fs, field{label: sel.Unquoted(), value: fv, pos: p.pos(labelPos(fv), Position{})})
	}
	return fs
}

// build checks that the fields of val are allowed by the closed definition
// def (reporting each unknown one with a suggestion), builds a value from the
// allowed fields, then the extra fields (defaults, a name) that val does not
// set itself, unifies it with def and validates it. It returns the unified
// value, the fields used and whether it is valid. Building from the allowed
// fields only keeps one unknown key from hiding CUE's other errors.
func (p *loader) build(def, val cue.Value, path string, fallback Position, extra []field, skip []string) (cue.Value, []field, bool) {
	ok, rebuild := true, false
	var used []field
	have := map[string]bool{}
	for _, f := range p.fields(val) {
		if contains(skip, f.label) {
			rebuild = true
			continue
		}
		if !p.checkAllowed(def, f, path) {
			ok, rebuild = false, true
			continue
		}
		have[f.label] = true
		used = append(used, f)
	}
	// Start from val itself when all of it is used (the common case, and
	// cheaper); otherwise rebuild from the used fields.
	v, start := val, len(used)
	if rebuild {
		v, start = p.empty, 0
	}
	for _, f := range extra {
		if !have[f.label] {
			used = append(used, f)
		}
	}
	for _, f := range used[start:] {
		v = v.FillPath(cue.MakePath(cue.Str(f.label)), f.value)
	}
	u := v.Unify(def)
	if err := u.Validate(cue.Concrete(true)); err != nil {
		p.cueErrors(err, path, fallback, def, v)
		ok = false
	}
	return u, used, ok
}

// checkAllowed reports f if def does not allow it, and recurses into nested
// closed structs (control).
func (p *loader) checkAllowed(def cue.Value, f field, path string) bool {
	fp := join(path, f.label)
	if !def.Allows(cue.Str(f.label)) {
		p.unknownField(def, f, fp)
		return false
	}
	sub := lookupField(def, f.label)
	if !sub.Exists() || sub.IncompleteKind() != cue.StructKind || f.value.IncompleteKind() != cue.StructKind {
		return true
	}
	if sub.Allows(cue.Str("__manifold_open_probe__")) {
		return true // an open struct: anything goes
	}
	ok := true
	for _, nf := range p.fields(f.value) {
		if !p.checkAllowed(sub, nf, fp) {
			ok = false
		}
	}
	return ok
}

func (p *loader) unknownField(def cue.Value, f field, path string) {
	if p.unknown == nil {
		p.unknown = map[string]bool{}
	}
	p.unknown[path] = true
	p.errs.addf(f.pos, path, "field not allowed%s", suggest(f.label, fieldNames(def)))
}

// fieldNames lists the regular and optional fields a definition declares.
func fieldNames(def cue.Value) []string {
	it, err := def.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	var names []string
	for it.Next() {
		names = append(names, it.Selector().Unquoted())
	}
	return names
}

// lookupField finds a regular, required or optional field of v.
func lookupField(v cue.Value, label string) cue.Value {
	for _, sel := range []cue.Selector{cue.Str(label), cue.Str(label).Optional(), cue.Str(label).Required()} {
		if f := v.LookupPath(cue.MakePath(sel)); f.Exists() {
			return f
		}
	}
	return cue.Value{}
}

// cueErrors converts CUE's errors into Errors. path prefixes the error
// paths; def and input, when valid, explain empty disjunctions.
func (p *loader) cueErrors(err error, path string, fallback Position, def, input cue.Value) {
	// Errors name paths from the document's root when input is part of the
	// document; make them relative to input.
	var base []string
	if input.Exists() {
		for _, sel := range input.Path().Selectors() {
			base = append(base, sel.String())
		}
		base = relPath(base)
	}
	relOf := func(e cueerrors.Error) []string {
		r := relPath(e.Path())
		if hasPrefix(r, base) {
			r = r[len(base):]
		}
		return r
	}
	errs := cueerrors.Errors(err)
	for i := 0; i < len(errs); i++ {
		e := errs[i]
		rel := relOf(e)
		full := joinPath(path, rel)
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		pos := p.inputPos(e)
		if strings.HasSuffix(format, "errors in empty disjunction:") {
			// The errors that follow are the failed alternatives; say once
			// what the value is and what was allowed instead.
			for i+1 < len(errs) && hasPrefix(relPath(errs[i+1].Path()), relPath(e.Path())) {
				i++
				if pos == (Position{}) {
					pos = p.inputPos(errs[i])
				}
			}
			msg = disjunctionMessage(def, input, rel, msg)
		}
		if format == "field not allowed" && p.unknown[full] {
			continue
		}
		if pos == (Position{}) {
			pos = fallback
		}
		p.errs.add(&Error{Pos: pos, Path: full, Message: msg})
	}
}

// inputPos returns e's first position in the input file, or zero.
func (p *loader) inputPos(e cueerrors.Error) Position {
	for _, tp := range append(e.InputPositions(), e.Position()) {
		if tp.IsValid() && tp.Filename() == p.filename {
			return p.pos(tp, Position{})
		}
	}
	return Position{}
}

// disjunctionMessage describes a value that matched none of the allowed
// alternatives, quoting the schema's constraint.
func disjunctionMessage(def, input cue.Value, rel []string, fallback string) string {
	if !def.Exists() || !input.Exists() {
		return fallback
	}
	d, v := def, input
	for _, r := range rel {
		if r == "" {
			return fallback
		}
		if r[0] == '[' { // a list item: health_checks[0], register_when_stable[1]
			n, err := strconv.Atoi(strings.Trim(r, "[]"))
			if err != nil {
				return fallback
			}
			d, v = d.LookupPath(cue.MakePath(cue.AnyIndex)), v.LookupPath(cue.MakePath(cue.Index(n)))
			continue
		}
		d, v = lookupField(d, r), v.LookupPath(cue.MakePath(cue.Str(r)))
	}
	if !d.Exists() || !v.Exists() {
		return fallback
	}
	var node ast.Node = d.Syntax()
	if f, ok := d.Source().(*ast.Field); ok {
		node = f.Value // the schema as written, with #Template
	}
	want, err := format.Node(node)
	if err != nil {
		return fallback
	}
	return fmt.Sprintf("invalid value %v (allowed: %s)", v, want)
}

// syntaxErrors converts YAML syntax errors, which carry only a line number
// in their text ("file:12: message").
func (p *loader) syntaxErrors(err error) {
	for _, e := range cueerrors.Errors(err) {
		text := e.Error()
		pos := Position{File: p.filename}
		if rest, ok := strings.CutPrefix(text, p.filename+":"); ok {
			if num, msg, ok := strings.Cut(rest, ": "); ok {
				if n, err := strconv.Atoi(num); err == nil {
					pos.Line, text = n, msg
				}
			}
		}
		if pos.Line == 0 {
			if ip := p.inputPos(e); ip != (Position{}) {
				pos = ip
				format, args := e.Msg()
				text = fmt.Sprintf(format, args...)
			}
		}
		p.errs.add(&Error{Pos: pos, Message: text})
	}
}

// jsonSyntaxError reports a JSON syntax error at its line and column, found
// again with encoding/json (CUE's JSON error has no position).
func (p *loader) jsonSyntaxError(src []byte, err error) {
	pos := Position{File: p.filename}
	msg := err.Error()
	var v any
	if jerr := json.Unmarshal(src, &v); jerr != nil {
		msg = jerr.Error()
		if se, ok := jerr.(*json.SyntaxError); ok {
			// Offset counts the offending byte; point at it.
			pos.Line, pos.Column = lineCol(src, int(se.Offset)-1)
		}
	}
	p.errs.add(&Error{Pos: pos, Message: "invalid JSON: " + msg})
}

// lineCol converts a byte offset into a 1-based line and column.
func lineCol(src []byte, off int) (int, int) {
	off = max(0, min(off, len(src)))
	line, col := 1, 1
	for _, c := range src[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// pos converts a CUE position, falling back when it is unknown.
func (p *loader) pos(tp token.Pos, fallback Position) Position {
	if !tp.IsValid() || tp.Filename() != p.filename {
		return fallback
	}
	return Position{File: tp.Filename(), Line: tp.Line(), Column: tp.Column()}
}

// labelPos returns where v's label is, or v's own position.
func labelPos(v cue.Value) token.Pos {
	if f, ok := v.Source().(*ast.Field); ok {
		return f.Label.Pos()
	}
	return v.Pos()
}

// relPath turns CUE's error path into path elements relative to the value
// that was validated: definition names (#File) are dropped, labels
// unquoted, list indexes rendered as "[i]".
func relPath(cp []string) []string {
	rel := make([]string, 0, len(cp))
	for _, s := range cp {
		switch {
		case strings.HasPrefix(s, "#"):
			continue
		case strings.HasPrefix(s, `"`):
			if u, err := strconv.Unquote(s); err == nil {
				s = u
			}
		case isIndex(s):
			s = "[" + s + "]"
		}
		rel = append(rel, s)
	}
	return rel
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func hasPrefix(p, prefix []string) bool {
	if len(p) < len(prefix) {
		return false
	}
	for i := range prefix {
		if p[i] != prefix[i] {
			return false
		}
	}
	return true
}

// join appends a label to a path.
func join(path, label string) string {
	if path == "" {
		return label
	}
	return path + "." + label
}

// joinPath appends path elements (labels or "[i]") to a path.
func joinPath(path string, rel []string) string {
	for _, r := range rel {
		if strings.HasPrefix(r, "[") {
			path += r
		} else {
			path = join(path, r)
		}
	}
	return path
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

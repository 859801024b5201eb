package schemas

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
)

// The fast path of a YAML manifest: the subset reader (yamlsub.go) reads
// the document into Go values; the top level (data, hierarchy, ...) is
// still built and checked as CUE, without its resources list; the
// resources are walked as Go values, and only the first resource of each
// shape (shape.go) is built as CUE and validated. Anything the fast path
// does not handle, and every manifest with an error, goes the full way
// again, so errors read exactly as they did: the fast path only ever
// returns valid manifests. TestFastPathMatches compares both paths.

// fastPath turns the fast path on (tests compare both ways).
var fastPath = true

// isYAMLName reports whether a manifest named filename is read as YAML.
func isYAMLName(filename string) bool {
	switch strings.ToLower(filepath.Ext(filename)) {
	case ".json", ".cue":
		return false
	}
	return true
}

// parseFast parses a YAML manifest on the fast path; ok is false when it
// is left to the full path (outside the subset, or not valid).
func parseFast(s *schema, filename string, src []byte) (*Manifest, bool) {
	if m, ok, again := parseFastStreaming(s, filename, src, streamItems); !again {
		return m, ok
	}
	m, ok, _ := parseFastStreaming(s, filename, src, false)
	return m, ok
}

// streamItems turns streaming the items of block entries off (tests
// compare both ways).
var streamItems = true

// asyncItemsOn turns the loader's second goroutine off (asyncItems; tests
// compare both ways).
var asyncItemsOn = true

// parseFastStreaming is parseFast, the items of the resources' block
// entries made into resources as they are read when stream is set; again
// says to parse without: the manifest has manifest-level defaults, which
// the items need first.
func parseFastStreaming(s *schema, filename string, src []byte, stream bool) (m *Manifest, ok, again bool) {
	tf := token.NewFile(filename, -1, len(src))
	p := &loader{s: s, filename: filename, empty: s.ctx.CompileString("{}"), sub: []*ynode{}, tf: tf}
	var sink itemSink
	var async *asyncItems
	if stream {
		tf.SetLinesForContent(src)
		sink = p
		if len(src) >= asyncItemsBytes && asyncItemsOn {
			async = newAsyncItems(p)
			sink = async
		}
	}
	root, ok := parseSubsetTo(src, sink)
	if async != nil && !async.wait() {
		ok = false // the loader gave an item up: as a synchronous sink would have stopped the reader
	}
	if !ok || root.kind != ymap {
		// Streamed items may have failed for want of manifest-level
		// defaults: the plain subset reader decides.
		return nil, false, len(p.streams) > 0
	}
	if len(p.streams) > 0 && (root.get("defaults") != nil || root.get("ccm").get("defaults") != nil) {
		return nil, false, true
	}
	list := root.get("resources")
	if ccm := root.get("ccm"); list == nil && ccm != nil {
		list = ccm.get("resources")
	}
	if list != nil && list.kind != yseq {
		return nil, false, false
	}
	if !stream {
		tf.SetLinesForContent(src)
	}
	b := astBuilder{tf: tf, list: list}
	doc := s.ctx.BuildExpr(b.expr(root))
	if doc.Err() != nil {
		return nil, false, false
	}
	if list != nil {
		p.sub = list.vals
		if p.sub == nil {
			p.sub = []*ynode{}
		}
	}
	m = p.manifest(doc)
	if p.bail || len(p.errs.errs) > 0 {
		return nil, false, false
	}
	if fastParsed != nil {
		fastParsed(p.validated)
	}
	return m, true, false
}

// streamedBlock is a block-shape entry whose items were made into
// resources as they were read (itemSink).
type streamedBlock struct {
	seq  *ynode
	typ  string
	def  cue.Value
	path string
	// defaults are the entry's defaults so far; out its resources.
	defaults []field
	out      []Resource
}

// streamedCount is how many resources the streamed entries made.
func (p *loader) streamedCount() int {
	n := 0
	for _, b := range p.streams {
		n += len(b.out)
	}
	return n
}

// blockType implements itemSink.
func (p *loader) blockType(key string) bool {
	return p.s.isType(key)
}

// item implements itemSink: blockSub, one item at a time.
func (p *loader) item(seq *ynode, ccm bool, entry int, typ string, j, left int, item *ynode) bool {
	b := p.streaming
	if b == nil || b.seq != seq {
		list := "resources"
		if ccm {
			list = "ccm.resources"
		}
		def, _ := p.s.def(typ)
		b = &streamedBlock{seq: seq, typ: typ, def: def, path: join(list+"["+strconv.Itoa(entry)+"]", typ), defaults: p.defaults[typ],
			out: make([]Resource, 0, left)}
		if p.streams == nil {
			p.streams = map[*ynode]*streamedBlock{}
		}
		p.streams[seq], p.streaming = b, b
	}
	return p.blockItem(b, j, item) && !p.bail
}

// fastParsed, a test hook, is told how many resources a parse the fast
// path took validated with CUE.
var fastParsed func(validated int)

// astBuilder turns subset nodes into CUE syntax, with their positions.
type astBuilder struct {
	tf *token.File
	// list is the resources list: built as an empty list.
	list *ynode
}

func (b astBuilder) pos(n *ynode) token.Pos {
	if n.off < 0 || n.line == 0 {
		return token.NoPos
	}
	return b.tf.Pos(int(n.off), token.NoRelPos)
}

func (b astBuilder) expr(n *ynode) ast.Expr {
	switch n.kind {
	case ymap:
		s := &ast.StructLit{Lbrace: b.pos(n), Elts: make([]ast.Decl, len(n.keys))}
		for i, k := range n.keys {
			l := ast.NewStringLabel(k.val.(string))
			ast.SetPos(l, b.pos(k))
			s.Elts[i] = &ast.Field{Label: l, Value: b.expr(n.vals[i])}
		}
		return s
	case yseq:
		l := &ast.ListLit{Lbrack: b.pos(n)}
		if n == b.list {
			return l
		}
		l.Elts = make([]ast.Expr, len(n.vals))
		for i, it := range n.vals {
			l.Elts[i] = b.expr(it)
		}
		return l
	}
	var e ast.Expr
	switch v := n.val.(type) {
	case nil:
		e = ast.NewNull()
	case bool:
		e = ast.NewBool(v)
	case int:
		e = ast.NewLit(token.INT, fmt.Sprint(v))
	case string:
		e = ast.NewString(v)
	}
	ast.SetPos(e, b.pos(n))
	return e
}

// subPos is the Position of a subset node.
func (p *loader) subPos(n *ynode) Position {
	return Position{File: p.filename, Line: int(n.line), Column: int(n.col)}
}

// subValue builds a subset node as a CUE value.
func (p *loader) subValue(n *ynode) cue.Value {
	return p.s.ctx.BuildExpr(astBuilder{tf: p.tf}.expr(n))
}

// countSub counts the resources of the subset entries, as countResources
// does for a list.
func countSub(entries []*ynode) int {
	n := 0
	for _, e := range entries {
		if e.kind != ymap {
			continue
		}
		if e.get("type") != nil || len(e.keys) != 1 {
			n++
			continue
		}
		switch v := e.vals[0]; v.kind {
		case ymap:
			n++
		case yseq:
			for _, item := range v.vals {
				if item.get(defaultsName) == nil {
					n++
				}
			}
		}
	}
	return n
}

// resourcesSub is resources over the subset's entries. It handles the
// flat, block and single shapes when they are valid; anything else sets
// p.bail.
func (p *loader) resourcesSub(entries []*ynode, path string) []Resource {
	if len(entries) == 1 && len(p.streams) == 1 {
		// One block entry, streamed (e2e/bench's manifests): its
		// resources are the manifest's, not copied.
		if e := entries[0]; e.kind == ymap && len(e.keys) == 1 {
			if b, ok := p.streams[e.vals[0]]; ok {
				return b.out
			}
		}
	}
	out := make([]Resource, 0, countSub(entries)+p.streamedCount())
	for i, e := range entries {
		if p.bail {
			return nil
		}
		ep := fmt.Sprintf("%s[%d]", path, i)
		if e.kind != ymap {
			p.bail = true
			return nil
		}
		if t := e.get("type"); t != nil {
			typ, ok := t.val.(string)
			def, known := p.s.def(typ)
			if t.kind != yscalar || !ok || !known {
				p.bail = true
				return nil
			}
			if r, ok := p.resourceSub(typ, def, e, ep, p.subPos(e), p.defaults[typ], nil); ok {
				out = append(out, r)
			}
			continue
		}
		if len(e.keys) != 1 {
			p.bail = true
			return nil
		}
		typ := e.keys[0].val.(string)
		def, known := p.s.def(typ)
		if !known {
			p.bail = true
			return nil
		}
		bp, bpos := join(ep, typ), p.subPos(e.keys[0])
		switch v := e.vals[0]; {
		case v.kind == yscalar && v.val == nil:
		case v.kind == ymap:
			if v.get("name") == nil {
				p.bail = true
				return nil
			}
			if r, ok := p.resourceSub(typ, def, v, bp, bpos, p.defaults[typ], nil); ok {
				out = append(out, r)
			}
		case v.kind == yseq:
			if b, ok := p.streams[v]; ok {
				out = append(out, b.out...)
				continue
			}
			out = p.blockSub(out, typ, def, v.vals, bp)
		default:
			p.bail = true
			return nil
		}
	}
	return out
}

// blockSub is block over the subset's items of a block-shape list.
func (p *loader) blockSub(out []Resource, typ string, def cue.Value, items []*ynode, path string) []Resource {
	b := streamedBlock{typ: typ, def: def, path: path, defaults: p.defaults[typ], out: out}
	for j, item := range items {
		if p.bail || !p.blockItem(&b, j, item) {
			return nil
		}
	}
	return b.out
}

// blockItem makes the j-th item of a block-shape list into a resource
// appended to b.out, or into b's defaults; false when it leaves the
// manifest to the full path (p.bail).
func (p *loader) blockItem(b *streamedBlock, j int, item *ynode) bool {
	if item.kind != ymap || len(item.keys) != 1 {
		p.bail = true
		return false
	}
	typ, def := b.typ, b.def
	name, props := item.keys[0].val.(string), item.vals[0]
	if props.kind == yscalar && props.val == nil {
		props = nil
	} else if props.kind != ymap {
		p.bail = true
		return false
	}
	// path[j].name, made in one allocation.
	pb := append(p.pathBuf[:0], b.path...)
	pb = append(pb, '[')
	pb = strconv.AppendInt(pb, int64(j), 10)
	pb = append(pb, "]."...)
	pb = append(pb, name...)
	p.pathBuf = pb
	np, pos := string(pb), p.subPos(item.keys[0])
	if name == defaultsName {
		pv := p.empty
		if props != nil {
			pv = p.subValue(props)
		}
		nameField := field{label: "name", value: p.s.ctx.Encode(defaultsName), pos: pos}
		_, used, ok := p.build(def, pv, np, pos, []field{nameField}, []string{"name"})
		if !ok {
			p.bail = true
			return false
		}
		var block []field
		for _, f := range used {
			if f.label != "name" {
				block = append(block, f)
			}
		}
		b.defaults = overlay(p.defaults[typ], block)
		return true
	}
	// Made in place: a Resource is some 270 bytes.
	b.out = append(b.out, Resource{})
	if !p.resourceSubInto(&b.out[len(b.out)-1], typ, def, props, np, pos, b.defaults, item.keys[0].val) {
		b.out = b.out[:len(b.out)-1]
		return false
	}
	return true
}

// resourceSub is resource over a subset mapping of properties (nil for
// none), with the resource's name (a string) when it is a block item's
// key, else nil.
func (p *loader) resourceSub(typ string, def cue.Value, props *ynode, path string, pos Position, defaults []field, name any) (Resource, bool) {
	var r Resource
	ok := p.resourceSubInto(&r, typ, def, props, path, pos, defaults, name)
	return r, ok
}

// resourceSubInto is resourceSub into *dst.
func (p *loader) resourceSubInto(dst *Resource, typ string, def cue.Value, props *ynode, path string, pos Position, defaults []field, name any) bool {
	fs := p.fieldBuf[:0]
	keyed := shapeCache
	if props != nil {
		for i, k := range props.keys {
			label, v := k.val.(string), props.vals[i]
			if v.kind == yseq && refList(label) {
				refs, ok := stringItems(v)
				if !ok {
					keyed = false
					break
				}
				fs = append(fs, scalarField{label, refs})
				continue
			}
			if v.kind != yscalar || v.val == nil {
				keyed = false
				break
			}
			fs = append(fs, scalarField{label, v.val})
		}
	}
	if keyed && name != nil && !props.has("name") {
		fs = append(fs, scalarField{"name", name})
	}
	if keyed && len(defaults) > 0 {
		for _, sf := range p.defaultScalars(defaults) {
			if props.has(sf.label) {
				continue
			}
			if sf.v == nil { // not a scalar
				keyed = false
				break
			}
			fs = append(fs, sf)
		}
	}
	p.fieldBuf = fs
	var key string
	if keyed {
		k, free := p.shapeKeyOf(typ, def, fs)
		if s, ok := p.shapes[string(k)]; ok {
			p.fromShapeInto(dst, s, free, path, pos)
			return true
		}
		key = string(k)
	}
	pv := p.empty
	if props != nil {
		pv = p.subValue(props)
	}
	extra := defaults
	if name != nil {
		extra = append([]field{{label: "name", value: p.s.ctx.Encode(name), pos: pos}}, defaults...)
	}
	r, ok := p.validateShape(typ, def, pv, path, pos, extra, key, keyed)
	if !ok {
		p.bail = true
	}
	*dst = r
	return ok
}

// refList reports whether a field is a list of references, which the
// shape of a resource holds as a list of strings (shape.go).
func refList(label string) bool { return label == "require" || label == "subscribe" }

// stringItems returns the items of a sequence when they are all strings.
func stringItems(seq *ynode) ([]string, bool) {
	out := make([]string, len(seq.vals))
	for i, it := range seq.vals {
		s, ok := it.val.(string)
		if it.kind != yscalar || !ok {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// defaultScalars returns the scalar values of a non-empty list of
// defaults (scalarOfCached; a nil value for a field that is not a
// scalar), which every resource of their type and block repeats: made
// once per list.
func (p *loader) defaultScalars(defaults []field) []scalarField {
	if d := &p.lastDefaults; len(d.of) == len(defaults) && &d.of[0] == &defaults[0] {
		return d.scalars
	}
	out := make([]scalarField, len(defaults))
	for i, f := range defaults {
		out[i], _ = p.scalarOfCached(f)
	}
	p.lastDefaults = cachedDefaults{of: defaults, scalars: out}
	return out
}

// cachedDefaults are the scalars of the last list of defaults (of, kept
// alive, so no other list can take its address).
type cachedDefaults struct {
	of      []field
	scalars []scalarField
}

// scalarOfCached is scalarOf for the fields of defaults, which every
// resource of their type and block repeats.
func (p *loader) scalarOfCached(f field) (scalarField, bool) {
	if p.scalars == nil {
		p.scalars = map[cue.Value]scalarField{}
	}
	if sf, ok := p.scalars[f.value]; ok {
		return sf, sf.v != nil
	}
	sf, ok := scalarOf(f)
	if !ok {
		sf = scalarField{label: f.label}
	}
	p.scalars[f.value] = sf
	return sf, ok
}

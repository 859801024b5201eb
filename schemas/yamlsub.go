package schemas

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// The YAML of nearly every manifest is a small subset of the language:
// block mappings and sequences, one-line flow collections, plain and
// one-line quoted scalars, comments. yaml.v3 parses any YAML, at about
// 20 allocations per scalar; CUE then builds a syntax tree and a value
// from it. For a manifest of 20,000 files that was most of the parse.
//
// parseSubset reads the subset directly into nodes that hold Go values
// and positions. It refuses (ok false) anything outside the subset or
// anything whose meaning it is not sure to read as yaml.v3 and CUE's
// YAML decoder do: anchors, aliases, tags, block scalars, multi-line
// scalars and flow collections, documents markers, tabs, carriage
// returns, numbers other than plain decimal integers, duplicate keys,
// and every syntax error. A refused manifest takes the full path
// (yaml.v3, CUE), which also reports its errors: the subset reader never
// reports an error itself. TestSubsetMatchesYAML compares the two readers.

// ynode is a node of the subset: a mapping, a sequence or a scalar.
type ynode struct {
	kind byte // ymap, yseq or yscalar
	// off is the byte offset of the node's first character (a flow
	// collection's bracket, a quoted scalar's quote); line and col its
	// position (1-based, col in runes as yaml.v3 counts).
	// (int32: a manifest is at most MaxManifestBytes.)
	off, line, col int32
	// val is a scalar's value: string, int, bool or nil.
	val any
	// keys and vals are a mapping's keys (scalars holding strings) and
	// values; a sequence's items are in vals. A node is a mapping or a
	// sequence, never both (a node is 88
	// bytes instead of 128; e2e/bench's 20,000 files make 100,000).
	keys []*ynode
	vals []*ynode
	// set indexes the keys of a big mapping.
	set map[string]bool
}

const (
	ymap    = 'm'
	yseq    = 's'
	yscalar = 'v'
)

// get returns the value of a mapping's key, nil when absent.
func (n *ynode) get(key string) *ynode {
	if n == nil || n.kind != ymap {
		return nil
	}
	for i, k := range n.keys {
		if k.val.(string) == key {
			return n.vals[i]
		}
	}
	return nil
}

// subsetParser holds the state of one parseSubset.
type subsetParser struct {
	src []byte
	// lines are the byte offsets where lines start; inds their numbers
	// of leading spaces.
	lines []int
	inds  []int32
	// line is the current line (0-based) of the block parser.
	line int
	bad  bool
	// slab holds nodes, allocated in chunks; keys interns mapping keys
	// (most repeat: content, mode, owner).
	slab []ynode
	ptrs []*ynode
	keys map[string]any
	// buf is scratch for quoted scalars with escapes.
	buf []byte

	// sink, when set, receives the items of the block-shape entries of
	// the resources list one at a time as they are parsed; their nodes
	// are then reused (a 20,000-file block made 100,000 nodes, 9 MB,
	// garbage once walked). next is the role of the collection parsed
	// next (role*), entry the index of the resources entry being parsed,
	// entryCCM whether its list is ccm.resources, itemsType its type.
	sink      itemSink
	next      int
	entry     int
	entryCCM  bool
	inCCM     bool
	itemsType string
}

// itemSink receives the items of block-shape entries (subsetParser.sink).
type itemSink interface {
	// blockType reports whether key is a resource type: an entry whose
	// first key it is has its items streamed.
	blockType(key string) bool
	// item takes the j-th item of the sequence seq of a block-shape entry
	// of type typ, the entry-th of the resources list (ccm.resources when
	// ccm); left is at least the number of items from this one on. The
	// item's nodes are reused once it returns; false stops the parse (the
	// manifest is left to the full path).
	item(seq *ynode, ccm bool, entry int, typ string, j, left int, item *ynode) bool
}

// Roles of collections, for streaming a block's items (subsetParser.sink).
const (
	roleNone      = iota
	roleRoot      // the document's mapping
	roleCCM       // ccm's mapping
	roleResources // a resources sequence
	roleEntry     // an entry of the resources sequence
	roleItems     // the items of a block-shape entry
)

// slabMark is where the node chunks stood before an item was parsed.
type slabMark struct {
	slab []ynode
	ptrs []*ynode
}

// mark returns the chunks' state before a streamed item, with room made
// for a typical item in the current chunks.
func (p *subsetParser) mark() slabMark {
	if cap(p.slab)-len(p.slab) < 64 {
		p.slab = make([]ynode, 0, 256)
	}
	if cap(p.ptrs)-len(p.ptrs) < 128 {
		p.ptrs = make([]*ynode, 0, 1024)
	}
	return slabMark{p.slab, p.ptrs}
}

// reset gives the nodes made since m back for the next item: nothing
// points to them any more. An item that outgrew the chunks leaves the
// last new chunk to the next items (the old ones' rest unused), so that
// big items do not take a new chunk each.
func (p *subsetParser) reset(m slabMark) {
	if &p.slab[:cap(p.slab)][0] == &m.slab[:cap(m.slab)][0] {
		p.slab = m.slab
	} else {
		p.slab = p.slab[:0]
	}
	if &p.ptrs[:cap(p.ptrs)][0] == &m.ptrs[:cap(m.ptrs)][0] {
		p.ptrs = m.ptrs
	} else {
		p.ptrs = p.ptrs[:0]
	}
}

// mk returns a new node holding n.
func (p *subsetParser) mk(n ynode) *ynode {
	if len(p.slab) == cap(p.slab) {
		p.slab = make([]ynode, 0, 256)
	}
	p.slab = append(p.slab, n)
	return &p.slab[len(p.slab)-1]
}

// maxSimpleKey is the longest implicit key yaml.v3 accepts.
const maxSimpleKey = 1024

// maxSubsetDepth bounds the nesting the subset reader follows; deeper
// documents take the full path.
const maxSubsetDepth = 64

// parseSubset parses src, returning its root node, or ok false when src
// is not in the subset (or not valid YAML).
func parseSubset(src []byte) (*ynode, bool) { return parseSubsetTo(src, nil) }

// parseSubsetTo is parseSubset with the items of the resources' block
// entries handed to sink (when not nil) instead of kept in the tree.
func parseSubsetTo(src []byte, sink itemSink) (*ynode, bool) {
	if !subsetBytes(src) {
		return nil, false
	}
	p := &subsetParser{src: src, lines: make([]int, 0, 1+len(src)/32), sink: sink}
	p.lines = append(p.lines, 0)
	for i, c := range src {
		if c == '\n' && i+1 < len(src) {
			p.lines = append(p.lines, i+1)
		}
	}
	p.inds = make([]int32, len(p.lines))
	for l, start := range p.lines {
		i := start
		for i < len(src) && src[i] == ' ' {
			i++
		}
		p.inds[l] = int32(i - start)
	}
	p.line = 0
	if !p.skipBlank() {
		return nil, false // empty: the full path says so
	}
	if p.indent(p.line) != 0 {
		return nil, false
	}
	if sink != nil {
		p.next = roleRoot
	}
	root := p.blockNode(0, 0)
	if p.bad || root == nil || p.skipBlank() {
		return nil, false
	}
	return root, true
}

// subsetBytes reports whether src holds only characters the subset
// reader handles: valid UTF-8, printable (as YAML defines it), no tabs or
// carriage returns, no byte order mark.
func subsetBytes(src []byte) bool {
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\n' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError || r == 0xFEFF || r < 0xA0 && r != 0x85 || r >= 0xD800 && r < 0xE000 || r == 0xFFFE || r == 0xFFFF {
			return false
		}
		i += size
	}
	return true
}

// lineText returns line l's bytes without its newline.
func (p *subsetParser) lineText(l int) []byte {
	start := p.lines[l]
	end := len(p.src)
	if l+1 < len(p.lines) {
		end = p.lines[l+1] - 1
	} else if end > start && p.src[end-1] == '\n' {
		end--
	}
	return p.src[start:end]
}

// indent returns the number of leading spaces of line l.
func (p *subsetParser) indent(l int) int { return int(p.inds[l]) }

// skipBlank moves p.line to the next line holding something other than
// spaces and a comment, and reports whether there is one. Document
// markers and directives make the document refused.
func (p *subsetParser) skipBlank() bool {
	for ; p.line < len(p.lines); p.line++ {
		t := p.lineText(p.line)
		i := p.indent(p.line)
		if i == len(t) || t[i] == '#' {
			continue
		}
		if i == 0 && (t[0] == '%' || hasMarker(t, "---") || hasMarker(t, "...")) {
			p.bad = true
			return false
		}
		return true
	}
	return false
}

func hasMarker(t []byte, m string) bool {
	return len(t) >= 3 && string(t[:3]) == m && (len(t) == 3 || t[3] == ' ')
}

// col returns the 1-based rune column of offset off on line l.
func (p *subsetParser) col(l, off int) int {
	start := p.lines[l]
	seg := p.src[start:off]
	for _, c := range seg {
		if c >= utf8.RuneSelf {
			return utf8.RuneCount(seg) + 1
		}
	}
	return off - start + 1
}

// blockNode parses the block collection starting on p.line, whose first
// line is indented by ind: a sequence if it starts with "- ", else a
// mapping.
func (p *subsetParser) blockNode(ind, depth int) *ynode {
	if depth > maxSubsetDepth {
		p.bad = true
		return nil
	}
	t := p.lineText(p.line)
	if isDash(t, ind) {
		return p.blockSeq(ind, depth)
	}
	return p.blockMap(ind, p.lines[p.line]+ind, depth)
}

// isDash reports whether t holds a sequence entry indicator at ind.
func isDash(t []byte, ind int) bool {
	return ind < len(t) && t[ind] == '-' && (ind+1 == len(t) || t[ind+1] == ' ')
}

// blockSeq parses a block sequence whose dashes are at column ind.
func (p *subsetParser) blockSeq(ind, depth int) *ynode {
	role := p.next
	p.next = roleNone
	start := p.lines[p.line] + ind
	n := p.mk(ynode{kind: yseq, off: int32(start), line: int32(p.line + 1), col: int32(p.col(p.line, start))})
	// A block's items are handed to the sink one by one; the entries of
	// a resources list are told their role and index.
	stream := role == roleItems
	typ, entry, ccm := p.itemsType, p.entry, p.entryCCM
	var at slabMark
	j, left := 0, 0
	if stream {
		left = p.dashesFrom(p.line, ind)
	}
	add := func(v *ynode) {
		p.next = roleNone
		if !stream {
			n.vals = append(n.vals, v)
			return
		}
		if !p.bad && !p.sink.item(n, ccm, entry, typ, j, left-j, v) {
			p.bad = true
		}
		j++
		p.reset(at)
	}
	for !p.bad && p.skipBlank() {
		if stream {
			at = p.mark()
		}
		if role == roleResources {
			p.next, p.entry, p.entryCCM = roleEntry, len(n.vals), p.inCCM
		}
		i := p.indent(p.line)
		if i < ind {
			break
		}
		t := p.lineText(p.line)
		if i > ind || !isDash(t, ind) {
			if i == ind {
				break // an indentless sequence ends at its mapping's next key
			}
			p.bad = true
			break
		}
		// Content after "- ".
		c := ind + 1
		for c < len(t) && t[c] == ' ' {
			c++
		}
		if c == len(t) || t[c] == '#' {
			if c < len(t) && t[c-1] != ' ' {
				p.bad = true
				break
			}
			p.line++
			add(p.nested(ind, false, depth))
			continue
		}
		lineStart := p.lines[p.line]
		if isDash(t, c) {
			p.bad = true // "- - x": a sequence in a sequence on one line
			break
		}
		if p.isKey(t, c) {
			add(p.blockMap(c, lineStart+c, depth+1))
			continue
		}
		p.next = roleNone
		v := p.inlineValue(lineStart+c, depth, ind)
		p.line++
		p.noContinuation(ind)
		add(v)
	}
	p.next = roleNone
	return n
}

// nested parses the value of a key or dash that ends its line: the block
// collection on the following lines, indented more than ind (or, for a
// mapping's key, a sequence at ind), else null.
func (p *subsetParser) nested(ind int, key bool, depth int) *ynode {
	if !p.skipBlank() {
		return p.mk(ynode{kind: yscalar})
	}
	i := p.indent(p.line)
	if i > ind || key && i == ind && isDash(p.lineText(p.line), i) {
		return p.blockNode(i, depth+1)
	}
	return p.mk(ynode{kind: yscalar, off: -1})
}

// noContinuation refuses the document when the line after a scalar
// continues it (a multi-line plain scalar) or is indented oddly.
func (p *subsetParser) noContinuation(ind int) {
	if p.skipBlank() && p.indent(p.line) > ind {
		p.bad = true
	}
}

// isKey reports whether the text at t[c:] is a mapping key followed by
// ": " or ":" at the end of the line.
func (p *subsetParser) isKey(t []byte, c int) bool {
	_, end, ok := p.keyAt(t, c)
	return ok && end > 0
}

// keyAt reads the key at t[c:]: it returns the key (a string, boxed
// once per distinct short key), the index just past its colon, and ok
// false when there is no key there.
func (p *subsetParser) keyAt(t []byte, c int) (any, int, bool) {
	if c >= len(t) {
		return nil, 0, false
	}
	var key any
	var end int
	switch t[c] {
	case '"', '\'':
		s, e, ok := p.quoted(t, c)
		if !ok {
			return nil, 0, false
		}
		key, end = s, e
		for end < len(t) && t[end] == ' ' {
			end++
		}
		if end >= len(t) || t[end] != ':' {
			return nil, 0, false
		}
	default:
		if !plainStart(t, c, false) {
			return nil, 0, false
		}
		end = -1
		for i := c; i < len(t); i++ {
			if t[i] == '#' && t[i-1] == ' ' {
				break
			}
			if t[i] == ':' && (i+1 == len(t) || t[i+1] == ' ') {
				end = i
				break
			}
		}
		if end < 0 {
			return nil, 0, false
		}
		rawb := t[c:end]
		for len(rawb) > 0 && rawb[len(rawb)-1] == ' ' {
			rawb = rawb[:len(rawb)-1]
		}
		if k, ok := p.keys[string(rawb)]; ok {
			key = k
			break
		}
		s, ok := plainString(rawb)
		if !ok {
			return nil, 0, false
		}
		key = s
		if p.keys == nil {
			p.keys = map[string]any{}
		}
		if len(p.keys) < 256 && len(s) <= 32 {
			p.keys[s] = key
		}
	}
	if end-c > maxSimpleKey {
		return nil, 0, false // yaml.v3 refuses longer implicit keys
	}
	if end+1 < len(t) && t[end+1] != ' ' {
		return nil, 0, false
	}
	return key, end + 1, true
}

// plainString returns a plain scalar that resolves to a string; ok is
// false for any other.
func plainString(b []byte) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	if strings.IndexByte("+-.0123456789nNtTfF~<", b[0]) < 0 {
		return string(b), true
	}
	v, ok := resolvePlain(string(b))
	s, isStr := v.(string)
	return s, ok && isStr
}

// blockMap parses a block mapping whose keys are at column ind; its first
// key is at byte offset first (on p.line, possibly after a dash).
func (p *subsetParser) blockMap(ind, first, depth int) *ynode {
	if depth > maxSubsetDepth {
		p.bad = true
		return nil
	}
	role := p.next
	p.next = roleNone
	n := p.mk(ynode{kind: ymap, off: int32(first), line: int32(p.line + 1), col: int32(p.col(p.line, first))})
	c := first - p.lines[p.line]
	for !p.bad {
		t := p.lineText(p.line)
		key, after, ok := p.keyAt(t, c)
		if !ok {
			p.bad = true
			return n
		}
		lineStart := p.lines[p.line]
		kn := p.mk(ynode{kind: yscalar, off: int32(lineStart + c), line: int32(p.line + 1), col: int32(p.col(p.line, lineStart+c)), val: key})
		if n.has(key.(string)) {
			p.bad = true // yaml.v3: mapping key already defined
			return n
		}
		v := after
		for v < len(t) && t[v] == ' ' {
			v++
		}
		if role != roleNone {
			p.next = p.roleOf(role, key.(string), len(n.keys) == 0)
		}
		var val *ynode
		if v == len(t) || t[v] == '#' {
			p.line++
			val = p.nested(ind, true, depth)
		} else {
			p.next = roleNone
			val = p.inlineValue(lineStart+v, depth, ind)
			p.line++
			p.noContinuation(ind)
		}
		p.next = roleNone
		p.addKey(n, kn, val)
		if p.bad || !p.skipBlank() {
			break
		}
		i := p.indent(p.line)
		if i < ind || i == ind && isDash(p.lineText(p.line), i) {
			break
		}
		if i > ind {
			p.bad = true
			break
		}
		c = ind
	}
	return n
}

// dashesFrom counts the lines from l on whose first character is a dash
// at column ind: at least the items left of a sequence at ind.
func (p *subsetParser) dashesFrom(l, ind int) int {
	n := 0
	for ; l < len(p.lines); l++ {
		if int(p.inds[l]) == ind && isDash(p.lineText(l), ind) {
			n++
		}
	}
	return n
}

// roleOf is the role of the value of key in a mapping of role role
// (first: key is the mapping's first).
func (p *subsetParser) roleOf(role int, key string, first bool) int {
	switch {
	case role == roleRoot && key == "resources":
		p.inCCM = false
		return roleResources
	case role == roleRoot && key == "ccm":
		return roleCCM
	case role == roleCCM && key == "resources":
		p.inCCM = true
		return roleResources
	case role == roleEntry && first && p.sink.blockType(key):
		p.itemsType = key
		return roleItems
	}
	return roleNone
}

// has reports whether a mapping has key already.
func (n *ynode) has(key string) bool {
	if n == nil {
		return false
	}
	if n.set != nil {
		return n.set[key]
	}
	for _, k := range n.keys {
		if k.val.(string) == key {
			return true
		}
	}
	return false
}

// addKey appends a key and its value to a mapping; the first pairs
// are kept in chunks shared by the mappings.
func (p *subsetParser) addKey(n, k, v *ynode) {
	if n.keys == nil {
		if len(p.ptrs)+4 > cap(p.ptrs) {
			p.ptrs = make([]*ynode, 0, 1024)
		}
		i := len(p.ptrs)
		p.ptrs = p.ptrs[:i+4]
		n.keys, n.vals = p.ptrs[i:i:i+2], p.ptrs[i+2:i+2:i+4]
	}
	n.keys = append(n.keys, k)
	n.vals = append(n.vals, v)
	if n.set == nil && len(n.keys) > 16 {
		n.set = make(map[string]bool, 2*len(n.keys))
		for _, k := range n.keys {
			n.set[k.val.(string)] = true
		}
	} else if n.set != nil {
		n.set[k.val.(string)] = true
	}
}

// inlineValue parses the value starting at byte offset off on p.line,
// which must end the line (but for a comment), of a key or dash at
// column ind; a literal block scalar leaves p.line on its last line.
func (p *subsetParser) inlineValue(off, depth, ind int) *ynode {
	t := p.lineText(p.line)
	c := off - p.lines[p.line]
	var n *ynode
	var end int
	switch t[c] {
	case '|':
		return p.literal(t, c, ind)
	case '{', '[':
		n, end = p.flow(t, c, depth)
	case '"', '\'':
		s, e, ok := p.quoted(t, c)
		if !ok {
			p.bad = true
			return nil
		}
		n, end = p.mk(ynode{kind: yscalar, val: s}), e
	default:
		if !plainStart(t, c, false) {
			p.bad = true
			return nil
		}
		end = len(t)
		for i := c; i < len(t); i++ {
			if t[i] == '#' && t[i-1] == ' ' {
				end = i
				break
			}
			if t[i] == ':' && (i+1 == len(t) || t[i+1] == ' ') {
				p.bad = true // mapping values are not allowed in this context
				return nil
			}
		}
		raw := strings.TrimRight(string(t[c:end]), " ")
		v, ok := resolvePlain(raw)
		if !ok {
			p.bad = true
			return nil
		}
		n = p.mk(ynode{kind: yscalar, val: v})
	}
	if p.bad || n == nil {
		p.bad = true
		return nil
	}
	if !restIsComment(t, end) {
		p.bad = true
		return nil
	}
	if n.off == 0 && n.line == 0 {
		n.off, n.line, n.col = int32(off), int32(p.line+1), int32(p.col(p.line, off))
	}
	return n
}

// literal parses a literal block scalar ("|" or "|-", the content
// indentation found from its first line) whose header is at t[c], for a
// key or dash at column ind. It refuses the keep chomping ("|+"),
// indentation indicators, lines of spaces only, a scalar without content
// and one that ends the file without a newline.
func (p *subsetParser) literal(t []byte, c, ind int) *ynode {
	strip := false
	h := c + 1
	if h < len(t) && t[h] == '-' {
		strip, h = true, h+1
	}
	if h < len(t) && t[h] != ' ' || !restIsComment(t, h) {
		p.bad = true
		return nil
	}
	n := p.mk(ynode{kind: yscalar, off: int32(p.lines[p.line] + c), line: int32(p.line + 1), col: int32(p.col(p.line, p.lines[p.line]+c))})
	b := p.buf[:0]
	ci, last, empty := -1, -1, 0
	for l := p.line + 1; l < len(p.lines); l++ {
		lt := p.lineText(l)
		if len(lt) == 0 {
			empty++
			continue
		}
		i := p.indent(l)
		if i == len(lt) {
			p.bad = true // a line of spaces: its meaning depends on the indentation
			return nil
		}
		if ci < 0 {
			if i <= ind {
				break
			}
			ci = i
		}
		if i < ci {
			break
		}
		for ; empty > 0; empty-- {
			b = append(b, '\n')
		}
		b = append(b, lt[ci:]...)
		b = append(b, '\n')
		last = l
	}
	if last < 0 || last == len(p.lines)-1 && p.src[len(p.src)-1] != '\n' {
		p.bad = true
		return nil
	}
	if strip {
		for len(b) > 0 && b[len(b)-1] == '\n' {
			b = b[:len(b)-1]
		}
	}
	n.val = string(b)
	p.buf = b[:0]
	p.line = last
	return n
}

// restIsComment reports whether t[i:] holds only spaces and a comment.
func restIsComment(t []byte, i int) bool {
	sp := i == 0 || t[i-1] == ' '
	for ; i < len(t); i++ {
		switch {
		case t[i] == ' ':
			sp = true
		case t[i] == '#' && sp:
			return true
		default:
			return false
		}
	}
	return true
}

// plainStart reports whether a plain scalar may start at t[c] (YAML's
// indicators may not start one, "-", "?" and ":" only before a
// non-space); in flow, the flow indicators end one.
func plainStart(t []byte, c int, flow bool) bool {
	switch t[c] {
	case '-', '?', ':':
		return c+1 < len(t) && t[c+1] != ' ' && !(flow && strings.IndexByte(",[]{}", t[c+1]) >= 0)
	case ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', ' ':
		return false
	}
	return true
}

// flow parses a one-line flow collection at t[c] ('{' or '['), returning
// it and the index past its closing bracket.
func (p *subsetParser) flow(t []byte, c, depth int) (*ynode, int) {
	if depth > maxSubsetDepth {
		p.bad = true
		return nil, 0
	}
	lineStart := p.lines[p.line]
	n := p.mk(ynode{kind: yseq, off: int32(lineStart + c), line: int32(p.line + 1), col: int32(p.col(p.line, lineStart+c))})
	closing := byte(']')
	if t[c] == '{' {
		n.kind, closing = ymap, '}'
	}
	i := skipSpaces(t, c+1)
	if i < len(t) && t[i] == closing {
		return n, i + 1
	}
	for {
		if i >= len(t) {
			p.bad = true // multi-line flow collection
			return nil, 0
		}
		if n.kind == ymap {
			k, e, ok := p.flowScalar(t, i)
			if !ok {
				p.bad = true
				return nil, 0
			}
			ks, isStr := k.val.(string)
			if e-i > maxSimpleKey || !isStr || e >= len(t) || t[e] != ':' || e+1 < len(t) && t[e+1] != ' ' || n.has(ks) {
				p.bad = true
				return nil, 0
			}
			i = skipSpaces(t, e+1)
			if i >= len(t) {
				p.bad = true
				return nil, 0
			}
			if t[i] == ',' || t[i] == closing {
				p.addKey(n, k, p.mk(ynode{kind: yscalar, off: -1}))
			} else {
				v, e := p.flowValue(t, i, depth)
				if p.bad {
					return nil, 0
				}
				p.addKey(n, k, v)
				i = skipSpaces(t, e)
			}
		} else {
			v, e := p.flowValue(t, i, depth)
			if p.bad {
				return nil, 0
			}
			n.vals = append(n.vals, v)
			i = skipSpaces(t, e)
			if i < len(t) && t[i] == ':' {
				p.bad = true // a single-pair mapping in a sequence
				return nil, 0
			}
		}
		if i >= len(t) {
			p.bad = true
			return nil, 0
		}
		switch t[i] {
		case closing:
			return n, i + 1
		case ',':
			i = skipSpaces(t, i+1)
			if i < len(t) && t[i] == closing {
				return n, i + 1
			}
		default:
			p.bad = true
			return nil, 0
		}
	}
}

// flowValue parses a value inside a flow collection.
func (p *subsetParser) flowValue(t []byte, i, depth int) (*ynode, int) {
	if t[i] == '{' || t[i] == '[' {
		return p.flow(t, i, depth+1)
	}
	v, e, ok := p.flowScalar(t, i)
	if !ok {
		p.bad = true
		return nil, 0
	}
	return v, e
}

// flowScalar parses a quoted or plain scalar inside a flow collection,
// returning the index past it (past the spaces that follow it).
func (p *subsetParser) flowScalar(t []byte, i int) (*ynode, int, bool) {
	lineStart := p.lines[p.line]
	n := p.mk(ynode{kind: yscalar, off: int32(lineStart + i), line: int32(p.line + 1), col: int32(p.col(p.line, lineStart+i))})
	if t[i] == '"' || t[i] == '\'' {
		s, e, ok := p.quoted(t, i)
		if !ok {
			return nil, 0, false
		}
		n.val = s
		return n, skipSpaces(t, e), true
	}
	if !plainStart(t, i, true) {
		return nil, 0, false
	}
	end := len(t)
	for j := i; j < len(t); j++ {
		if strings.IndexByte(",[]{}", t[j]) >= 0 || t[j] == ':' && (j+1 == len(t) || t[j+1] == ' ' || strings.IndexByte(",[]{}", t[j+1]) >= 0) {
			end = j
			break
		}
		if t[j] == '#' && t[j-1] == ' ' {
			return nil, 0, false
		}
	}
	v, ok := resolvePlain(strings.TrimRight(string(t[i:end]), " "))
	if !ok {
		return nil, 0, false
	}
	n.val = v
	return n, end, true
}

func skipSpaces(t []byte, i int) int {
	for i < len(t) && t[i] == ' ' {
		i++
	}
	return i
}

// quoted reads a one-line double- or single-quoted scalar at t[c],
// returning its value and the index past its closing quote.
func (p *subsetParser) quoted(t []byte, c int) (string, int, bool) {
	q := t[c]
	b := p.buf[:0]
	plain := true
	for i := c + 1; i < len(t); i++ {
		ch := t[i]
		switch {
		case ch == q && q == '\'':
			if i+1 < len(t) && t[i+1] == '\'' {
				if plain {
					b, plain = append(b[:0], t[c+1:i]...), false
				}
				b = append(b, '\'')
				i++
				continue
			}
			if plain {
				return string(t[c+1 : i]), i + 1, true
			}
			p.buf = b
			return string(b), i + 1, true
		case ch == q:
			if plain {
				return string(t[c+1 : i]), i + 1, true
			}
			p.buf = b
			return string(b), i + 1, true
		case ch == '\\' && q == '"':
			if plain {
				b, plain = append(b[:0], t[c+1:i]...), false
			}
			if i+1 >= len(t) {
				return "", 0, false
			}
			i++
			switch t[i] {
			case '\\', '"', '/':
				b = append(b, t[i])
			case 'n':
				b = append(b, '\n')
			case 't':
				b = append(b, '\t')
			case 'r':
				b = append(b, '\r')
			case '0':
				b = append(b, 0)
			case 'u', 'U', 'x':
				size := map[byte]int{'x': 2, 'u': 4, 'U': 8}[t[i]]
				if i+size >= len(t) {
					return "", 0, false
				}
				r, err := strconv.ParseUint(string(t[i+1:i+1+size]), 16, 32)
				if err != nil || !utf8.ValidRune(rune(r)) {
					return "", 0, false
				}
				b = utf8.AppendRune(b, rune(r))
				i += size
			default:
				return "", 0, false
			}
		default:
			if !plain {
				b = append(b, ch)
			}
		}
	}
	return "", 0, false // not closed on this line
}

// resolvePlain resolves a plain scalar as yaml.v3 and CUE's YAML decoder
// do, for the values the subset takes: null, booleans, decimal integers
// and strings. ok is false for anything that might be another number, a
// timestamp, a merge key or an infinity.
func resolvePlain(s string) (any, bool) {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return nil, true
	case "true", "True", "TRUE":
		return true, true
	case "false", "False", "FALSE":
		return false, true
	case "<<":
		return nil, false
	}
	if strings.IndexByte("+-.0123456789", s[0]) < 0 {
		return s, true
	}
	if decimalInt(s) {
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil || int64(int(i)) != i {
			return nil, false
		}
		return int(i), true
	}
	// Anything that may read as a number (any base, underscores, floats,
	// infinities, not-a-number) or a timestamp is left to yaml.v3.
	for i := 0; i < len(s); i++ {
		if strings.IndexByte("0123456789+-._:eExXoObBaAcCdDfFtTzZ iInN", s[i]) < 0 {
			return s, true
		}
	}
	return nil, false
}

// decimalInt reports whether s is -?(0|[1-9][0-9]*) but "-0".
func decimalInt(s string) bool {
	d := s
	if d[0] == '-' {
		d = d[1:]
	}
	if d == "" || len(d) > 1 && d[0] == '0' || s == "-0" || len(d) > 18 {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

package schemas

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
)

// Validating a resource against its type's definition (CUE unification)
// costs far more than anything else a parse does. Most resources of a
// manifest share their shape: the same type, the same properties, and the
// same values for every property the schema constrains; they differ only in
// properties any value of their kind satisfies (a name, a content). The
// loader validates the first resource of each shape with CUE and derives the
// others from it, which gives the same result because the definitions have
// no constraint between fields (no comprehension or reference across
// properties): a field's validity depends on its own value only.

// shapeCache turns the derivation off (tests compare both ways).
var shapeCache = true

// shape is the first resource of a shape as validated and decoded.
type shape struct {
	r Resource
}

// shapeKey describes a resource before validation: its type, each field's
// label and, for a field the definition constrains, its value; the values
// of unconstrained fields are returned apart. ok is false for resources
// with values that are not scalars (lists, structs), which are validated on
// their own.
func (p *loader) shapeKey(typ string, def, props cue.Value, extra []field) (key string, free []scalarField, ok bool) {
	if !shapeCache {
		return "", nil, false
	}
	fs := p.fields(props)
	have := make(map[string]bool, len(fs)+len(extra))
	for _, f := range fs {
		have[f.label] = true
	}
	for _, f := range extra {
		if !have[f.label] {
			fs = append(fs, f)
		}
	}
	kvs := make([]scalarField, 0, len(fs))
	for _, f := range fs {
		sf, ok := scalarOf(f)
		if !ok {
			return "", nil, false
		}
		kvs = append(kvs, sf)
	}
	k, free := p.shapeKeyOf(typ, def, kvs)
	return string(k), free, true
}

// scalarField is a field whose value is a scalar, as Go holds it, or a
// list of references (require, subscribe: refList) as a []string.
type scalarField struct {
	label string
	v     any // string, int, bool or []string
}

// scalarOf returns a field's scalar value; ok is false for any other.
func scalarOf(f field) (scalarField, bool) {
	switch f.value.Kind() {
	case cue.StringKind:
		s, err := f.value.String()
		if err != nil {
			return scalarField{}, false
		}
		return scalarField{f.label, s}, true
	case cue.IntKind:
		i, err := f.value.Int64()
		if err != nil || int64(int(i)) != i {
			return scalarField{}, false
		}
		return scalarField{f.label, int(i)}, true
	case cue.BoolKind:
		x, err := f.value.Bool()
		if err != nil {
			return scalarField{}, false
		}
		return scalarField{f.label, x}, true
	}
	return scalarField{}, false
}

// kindOf names a scalar's kind as shapeKeyOf writes it.
func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int:
		return "int"
	case bool:
		return "bool"
	case []string:
		return "[...string]"
	}
	return ""
}

// shapeKeyOf is shapeKey over the scalar fields of a resource (its
// properties and the extra fields it does not set itself), in any order:
// fs is sorted in place. The key and the free fields returned are valid
// until the next call (their buffers are reused).
func (p *loader) shapeKeyOf(typ string, def cue.Value, fs []scalarField) ([]byte, []scalarField) {
	slices.SortFunc(fs, func(a, b scalarField) int { return strings.Compare(a.label, b.label) })
	b := append(p.keyBuf[:0], typ...)
	free := p.freeBuf[:0]
	for _, f := range fs {
		b = append(b, 0)
		b = append(b, f.label...)
		kind := kindOf(f.v)
		if p.unconstrained(typ, def, f.label, kind) {
			free = append(free, f)
			b = append(b, 0, '*')
			b = append(b, kind...)
			continue
		}
		b = append(b, 0, '=')
		b = append(b, kind...)
		b = append(b, ':')
		switch v := f.v.(type) {
		case string:
			b = strconv.AppendQuote(b, v)
		case int:
			b = strconv.AppendInt(b, int64(v), 10)
		default:
			b = strconv.AppendQuote(b, toString(v))
		}
	}
	p.keyBuf, p.freeBuf = b, free
	return b, free
}

func toString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	case []string:
		var b []byte
		for _, e := range v {
			b = strconv.AppendQuote(b, e)
		}
		return string(b)
	}
	return ""
}

// unconstrained reports whether every value of kind satisfies the field
// label of def.
func (p *loader) unconstrained(typ string, def cue.Value, label, kind string) bool {
	// The answers for the last type are searched first: a few labels
	// (interned: their strings compare by pointer), no hashing.
	lf := &p.lastFree
	if lf.typ == typ {
		for _, a := range lf.answers {
			if a.label == label && a.kind == kind {
				return a.free
			}
		}
	} else {
		lf.typ, lf.answers = typ, lf.answers[:0]
	}
	free := p.unconstrainedOf(typ, def, label, kind)
	if len(lf.answers) < maxLastFree {
		lf.answers = append(lf.answers, freeAnswer{label, kind, free})
	}
	return free
}

// freeOfType holds answers of unconstrained for one type.
type freeOfType struct {
	typ     string
	answers []freeAnswer
}

type freeAnswer struct {
	label, kind string
	free        bool
}

// maxLastFree bounds the answers kept for the last type: past it they are
// looked up in the map.
const maxLastFree = 16

func (p *loader) unconstrainedOf(typ string, def cue.Value, label, kind string) bool {
	k := freeKey{typ, label, kind}
	if v, ok := p.free[k]; ok {
		return v
	}
	free := false
	if sub := lookupField(def, label); sub.Exists() && commonOrProperty(label) {
		top := p.s.ctx.CompileString(kind)
		free = sub.Subsume(top) == nil
	}
	if p.free == nil {
		p.free = map[freeKey]bool{}
	}
	p.free[k] = free
	return free
}

// freeKey names a field of a type holding a kind of value.
type freeKey struct{ typ, label, kind string }

// commonOrProperty excludes the fields whose values the loader interprets
// beyond the schema (a timeout is parsed), which are always keyed by value.
func commonOrProperty(label string) bool { return label != "timeout" && label != "type" }

// fromShape derives a resource of a known shape: the shape's resource with
// this one's unconstrained values.
func (p *loader) fromShape(s *shape, free []scalarField, path string, pos Position) Resource {
	var r Resource
	p.fromShapeInto(&r, s, free, path, pos)
	return r
}

// fromShapeInto is fromShape into *r.
func (p *loader) fromShapeInto(r *Resource, s *shape, free []scalarField, path string, pos Position) {
	*r = s.r
	r.Pos, r.Path = pos, path
	r.Properties = maps.Clone(s.r.Properties)
	// References are rendered and cleaned in place: each resource has its
	// own lists (the free ones are this resource's already).
	ownRequire, ownSubscribe := false, false
	for _, f := range free {
		switch f.label {
		case "name":
			r.Name = f.v.(string)
		case "alias":
			r.Alias = f.v.(string)
		case "ensure":
			r.Ensure = f.v.(string)
		case "provider":
			r.Provider = f.v.(string)
		case "target":
			r.Target = f.v.(string)
		case "require":
			r.Require, ownRequire = f.v.([]string), true
		case "subscribe":
			r.Subscribe, ownSubscribe = f.v.([]string), true
		default:
			if r.Properties == nil {
				r.Properties = map[string]any{}
			}
			r.Properties[f.label] = f.v
		}
	}
	if !ownRequire {
		r.Require = slices.Clone(r.Require)
	}
	if !ownSubscribe {
		r.Subscribe = slices.Clone(r.Subscribe)
	}
}

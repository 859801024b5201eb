package schemas

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"cuelang.org/go/cue"
)

// defaultsName is the block-shape entry whose properties are defaults for
// the following resources of the block rather than a resource.
const defaultsName = "defaults"

// commonProps are the properties every type has; they go into Resource's
// fields, everything else into Resource.Properties.
var commonProps = map[string]bool{
	"type": true, "name": true, "alias": true, "ensure": true, "provider": true,
	"require": true, "subscribe": true, "control": true, "health_checks": true, "register_when_stable": true,
	"target": true, "timeout": true, "retry": true, "autoedge": true,
}

// countResources counts the resources a resources list declares, cheaply,
// so the limit is enforced before anything is validated.
func countResources(list cue.Value) int {
	n := 0
	it, err := list.List()
	if err != nil {
		return 0
	}
	for it.Next() {
		n += countEntry(it.Value())
	}
	return n
}

// countEntry counts the resources one entry of a resources list declares:
// one in the flat shape and in the single-resource shape, the
// non-defaults items of its list in the block shape.
func countEntry(e cue.Value) int {
	if e.LookupPath(cue.ParsePath("type")).Exists() {
		return 1
	}
	n := 0
	fit, err := e.Fields()
	if err != nil {
		return 0
	}
	for fit.Next() {
		if fit.Value().IncompleteKind() == cue.StructKind {
			n++ // {TYPE: {name: NAME, ...}}
			continue
		}
		bit, err := fit.Value().List()
		if err != nil {
			continue
		}
		for bit.Next() {
			if !bit.Value().LookupPath(cue.MakePath(cue.Str(defaultsName))).Exists() {
				n++
			}
		}
	}
	return n
}

// resources walks a resources list, in either shape, in declaration order.
// entries, when not nil, are the list's entries built apart (detach.go):
// list is then empty and only names where the list is.
func (p *loader) resources(list cue.Value, entries []entry, path string) []Resource {
	if entries == nil {
		it, err := list.List()
		if err != nil {
			return nil
		}
		for it.Next() {
			entries = append(entries, entry{value: it.Value()})
		}
	}
	var out []Resource
	for i, en := range entries {
		e, ep := en.value, fmt.Sprintf("%s[%d]", path, i)
		pos := p.pos(e.Pos(), p.pos(labelPos(list), Position{File: p.filename}))
		if e.IncompleteKind() != cue.StructKind {
			p.errs.addf(pos, ep, "a resource entry must be a map: {TYPE: [{NAME: {...}}]} (block shape) or {type: TYPE, name: NAME, ...} (flat shape)")
			continue
		}
		if t := e.LookupPath(cue.ParsePath("type")); t.Exists() {
			if r, ok := p.flat(e, t, ep, pos); ok {
				out = append(out, r)
			}
			continue
		}
		fs := p.fields(e)
		if len(fs) != 1 {
			p.errs.addf(pos, ep, "a block-shape entry has exactly one key, the resource type; got %s (a flat-shape entry needs type:)", labels(fs))
			continue
		}
		def, ok := p.typeDef(fs[0], ep)
		if !ok {
			continue
		}
		out = append(out, p.block(fs[0].label, def, fs[0].value, en.items, join(ep, fs[0].label), fs[0].pos)...)
	}
	return out
}

// typeDef returns the definition of the type named by f's label, reporting
// an unknown type.
func (p *loader) typeDef(f field, path string) (cue.Value, bool) {
	def, ok := p.s.def(f.label)
	if !ok {
		names := p.s.typeNames()
		p.errs.addf(f.pos, path, "unknown resource type %q%s; known types: %s",
			f.label, suggest(f.label, names), strings.Join(names, ", "))
	}
	return def, ok
}

// flat normalises a flat-shape entry {type: T, name: N, ...}.
func (p *loader) flat(e, t cue.Value, path string, pos Position) (Resource, bool) {
	typ, err := t.String()
	if err != nil {
		p.errs.addf(p.pos(t.Pos(), pos), join(path, "type"), "type must be a resource type name (a string)")
		return Resource{}, false
	}
	def, ok := p.typeDef(field{label: typ, pos: p.pos(t.Pos(), pos)}, join(path, "type"))
	if !ok {
		return Resource{}, false
	}
	return p.resource(typ, def, e, path, pos, p.defaults[typ], nil)
}

// block normalises the entries of a block-shape list: {NAME: {props}} items,
// with defaults items merged under the items that follow them. items, when
// not nil, are the list's items built apart (list is then empty).
func (p *loader) block(typ string, def, list cue.Value, items []cue.Value, path string, pos Position) []Resource {
	if list.IncompleteKind() == cue.NullKind {
		return nil
	}
	if items == nil && list.IncompleteKind() == cue.StructKind {
		// CCM's single-resource shape: {TYPE: {name: NAME, ...}}.
		return p.single(typ, def, list, path, pos)
	}
	if items == nil {
		it, err := list.List()
		if err != nil {
			p.errs.addf(pos, path, "a %s block is a list of {NAME: {properties}} entries", typ)
			return nil
		}
		for it.Next() {
			items = append(items, it.Value())
		}
	}
	var out []Resource
	defaults := p.defaults[typ]
	for j, item := range items {
		ip := fmt.Sprintf("%s[%d]", path, j)
		ipos := p.pos(item.Pos(), pos)
		fs := p.fields(item)
		if item.IncompleteKind() != cue.StructKind || len(fs) != 1 {
			p.errs.addf(ipos, ip, "a %s block entry is a map with one key, the resource name: {NAME: {properties}}; got %s (check the indentation)", typ, labels(fs))
			continue
		}
		name, props := fs[0].label, fs[0].value
		np := join(ip, name)
		if name == defaultsName {
			// Check the defaults on their own (with a stand-in name), then
			// keep their allowed fields for the resources that follow.
			nameField := field{label: "name", value: p.s.ctx.Encode(defaultsName), pos: fs[0].pos}
			_, used, _ := p.build(def, p.props(props, np, fs[0].pos), np, fs[0].pos, []field{nameField}, []string{"name"})
			var block []field
			for _, f := range used {
				if f.label != "name" {
					block = append(block, f)
				}
			}
			defaults = overlay(p.defaults[typ], block)
			continue
		}
		nameField := field{label: "name", value: p.s.ctx.Encode(name), pos: fs[0].pos}
		if r, ok := p.resource(typ, def, p.props(props, np, fs[0].pos), np, fs[0].pos, defaults, &nameField); ok {
			out = append(out, r)
		}
	}
	return out
}

// single normalises CCM's single-resource shape, a type key holding one
// map of properties with its name among them ({TYPE: {name: NAME, ...}}),
// into the one resource it declares.
func (p *loader) single(typ string, def, props cue.Value, path string, pos Position) []Resource {
	if !props.LookupPath(cue.MakePath(cue.Str("name"))).Exists() {
		p.errs.addf(p.pos(props.Pos(), pos), path, "a single %s resource is a map with its name: {%s: {name: NAME, ...}}; several are a list of {NAME: {properties}} entries; got %s (check the indentation)",
			typ, typ, labels(p.fields(props)))
		return nil
	}
	if r, ok := p.resource(typ, def, props, path, pos, p.defaults[typ], nil); ok {
		return []Resource{r}
	}
	return nil
}

// props returns a block entry's properties; a missing value (`- /tmp/x:`)
// means none.
func (p *loader) props(v cue.Value, path string, pos Position) cue.Value {
	switch v.IncompleteKind() {
	case cue.NullKind:
		return p.empty
	case cue.StructKind:
		return v
	}
	p.errs.addf(p.pos(v.Pos(), pos), path, "properties must be a map, got %v", v.IncompleteKind())
	return p.empty
}

// resource validates one resource's properties against its type's
// definition and decodes them.
func (p *loader) resource(typ string, def, props cue.Value, path string, pos Position, defaults []field, name *field) (Resource, bool) {
	extra := defaults
	if name != nil {
		extra = append([]field{*name}, defaults...)
	}
	key, free, keyed := p.shapeKey(typ, def, props, extra)
	if keyed {
		if s, ok := p.shapes[key]; ok {
			return p.fromShape(s, free, path, pos), true
		}
	}
	return p.validateShape(typ, def, props, path, pos, extra, key, keyed)
}

// validateShape validates a resource whose shape (key, when keyed) was
// not seen yet and remembers its shape.
func (p *loader) validateShape(typ string, def, props cue.Value, path string, pos Position, extra []field, key string, keyed bool) (Resource, bool) {
	p.validated++
	r, ok := p.validate(typ, def, props, path, pos, extra)
	if ok && keyed {
		if p.shapes == nil {
			p.shapes = map[string]*shape{}
		}
		s := &shape{r: r}
		s.r.Properties = maps.Clone(r.Properties)
		s.r.Require, s.r.Subscribe = slices.Clone(r.Require), slices.Clone(r.Subscribe)
		p.shapes[key] = s
	}
	return r, ok
}

// validate validates one resource's properties with CUE and decodes them.
func (p *loader) validate(typ string, def, props cue.Value, path string, pos Position, extra []field) (Resource, bool) {
	u, used, ok := p.build(def, props, path, pos, extra, nil)
	fieldPos := func(label string) Position {
		for _, f := range used {
			if f.label == label && f.pos != (Position{}) {
				return f.pos
			}
		}
		return pos
	}
	for _, f := range used {
		if f.label != "timeout" {
			continue
		}
		if s, err := f.value.String(); err == nil {
			if _, err := parseTimeout(s); err != nil {
				p.errs.addf(f.pos, join(path, "timeout"), "%v", err)
				ok = false
			}
		}
	}
	for _, group := range p.s.exclusiveOf(typ) {
		var set []string
		for _, label := range group {
			if u.LookupPath(cue.MakePath(cue.Str(label))).Exists() {
				set = append(set, label)
			}
		}
		if len(set) > 1 {
			p.errs.addf(fieldPos(set[1]), join(path, set[1]), "%s are mutually exclusive; set only one", strings.Join(set, " and "))
			ok = false
		}
	}
	if !ok {
		return Resource{}, false
	}
	r := Resource{Type: typ, Pos: pos, Path: path}
	it, err := u.Fields()
	if err != nil {
		p.errs.addf(pos, path, "%v", err)
		return Resource{}, false
	}
	for it.Next() {
		label, fv := it.Selector().Unquoted(), it.Value()
		var err error
		switch label {
		case "type":
		case "name":
			err = fv.Decode(&r.Name)
		case "alias":
			err = fv.Decode(&r.Alias)
		case "ensure":
			err = fv.Decode(&r.Ensure)
		case "provider":
			err = fv.Decode(&r.Provider)
		case "require":
			err = fv.Decode(&r.Require)
		case "subscribe":
			err = fv.Decode(&r.Subscribe)
		case "control":
			err = fv.Decode(&r.Control)
		case "health_checks":
			if err = fv.Decode(&r.HealthChecks); err == nil {
				for i, hc := range r.HealthChecks {
					r.HealthChecks[i] = normalize(hc).(map[string]any)
				}
			}
		case "register_when_stable":
			if err = fv.Decode(&r.RegisterWhenStable); err == nil {
				for i, e := range r.RegisterWhenStable {
					r.RegisterWhenStable[i] = normalize(e).(map[string]any)
				}
			}
		case "target":
			err = fv.Decode(&r.Target)
		case "retry":
			err = fv.Decode(&r.Retry)
		case "autoedge":
			r.AutoEdge = new(bool)
			err = fv.Decode(r.AutoEdge)
		case "timeout":
			var s string
			if err = fv.Decode(&s); err == nil {
				r.Timeout, err = parseTimeout(s)
			}
		default:
			var v any
			if err = fv.Decode(&v); err == nil {
				if r.Properties == nil {
					r.Properties = map[string]any{}
				}
				r.Properties[label] = normalize(v)
			}
		}
		if err != nil {
			p.errs.addf(fieldPos(label), join(path, label), "%v", err)
			ok = false
		}
	}
	return r, ok
}

// parseTimeout parses a timeout property.
func parseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: write a Go duration such as \"30s\", \"2m\" or \"1h30m\"", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %q: must not be negative", s)
	}
	return d, nil
}

// labels renders field labels for error messages.
func labels(fs []field) string {
	if len(fs) == 0 {
		return "no keys"
	}
	quoted := make([]string, len(fs))
	for i, f := range fs {
		quoted[i] = fmt.Sprintf("%q", f.label)
	}
	return "keys " + strings.Join(quoted, ", ")
}

// normalize makes decoded values uniform whatever their source: CUE decodes
// some integers (schema defaults) as int64, YAML ones as int; consumers get
// int, []any and map[string]any throughout.
func normalize(v any) any {
	switch v := v.(type) {
	case int64:
		if int64(int(v)) == v {
			return int(v)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = normalize(e)
		}
		return v
	case map[string]any:
		for k, e := range v {
			v[k] = normalize(e)
		}
		return v
	default:
		return v
	}
}

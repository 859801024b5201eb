package schemas

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"cuelang.org/go/cue"
	cueyaml "cuelang.org/go/encoding/yaml"
)

// manifestExtras decodes the manifest keys that may be written at the top
// level or in the ccm section (not both): resources_jet_file,
// pre_message, post_message and defaults. The manifest-level defaults are
// checked against their types' definitions and kept for the resources.
func (p *loader) manifestExtras(doc, v cue.Value, m *Manifest, filePos Position) {
	pick := func(key string) (cue.Value, string, bool) {
		top, ccm := v.LookupPath(cue.ParsePath(key)), v.LookupPath(cue.ParsePath("ccm."+key))
		if top.Exists() && ccm.Exists() {
			p.errs.addf(p.pos(labelPos(doc.LookupPath(cue.ParsePath("ccm."+key))), filePos), "ccm."+key,
				"%s is set both at the top level and in ccm; set it in one place", key)
			return cue.Value{}, "", false
		}
		if ccm.Exists() {
			return ccm, "ccm." + key, true
		}
		return top, key, top.Exists()
	}
	for key, dst := range map[string]*string{
		"resources_jet_file": &m.ResourcesJetFile,
		"pre_message":        &m.PreMessage,
		"post_message":       &m.PostMessage,
	} {
		if fv, path, ok := pick(key); ok {
			if err := fv.Decode(dst); err != nil {
				p.errs.addf(p.pos(fv.Pos(), filePos), path, "%v", err)
			}
		}
	}
	dv, path, ok := pick("defaults")
	if !ok {
		return
	}
	if err := dv.Decode(&m.Defaults); err != nil {
		p.errs.addf(p.pos(dv.Pos(), filePos), path, "%v", err)
		return
	}
	for typ, props := range m.Defaults {
		m.Defaults[typ] = normalize(props).(map[string]any)
	}
	p.defaults = map[string][]field{}
	// Fields of the document, for their positions.
	for _, f := range p.fields(doc.LookupPath(cue.ParsePath(path))) {
		fp := join(path, f.label)
		def, ok := p.typeDef(f, fp)
		if !ok {
			continue
		}
		p.defaults[f.label] = p.defaultFields(def, f.value, fp, f.pos)
	}
}

// defaultFields checks a defaults map against a type's definition (with
// a stand-in name) and returns its allowed fields, sorted by label.
func (p *loader) defaultFields(def, props cue.Value, path string, pos Position) []field {
	nameField := field{label: "name", value: p.s.ctx.Encode(defaultsName), pos: pos}
	_, used, _ := p.build(def, p.props(props, path, pos), path, pos, []field{nameField}, []string{"name"})
	out := make([]field, 0, len(used))
	for _, f := range used {
		if f.label != "name" {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b field) int { return cmp.Compare(a.label, b.label) })
	return out
}

// overlay returns the fields of over followed by those of base it does not
// set: a block's defaults entry over the manifest-level defaults.
func overlay(base, over []field) []field {
	out := slices.Clone(over)
	for _, f := range base {
		if !slices.ContainsFunc(over, func(o field) bool { return o.label == f.label }) {
			out = append(out, f)
		}
	}
	return out
}

// ParseResources parses src, the YAML text a manifest's resources_jet_file
// rendered, as the resources list of m (named filename in errors, with
// lines of the rendered text), applying m's manifest-level defaults. An
// empty list is an error, as in CCM: a template that renders nothing is
// almost always a mistake.
func ParseResources(m *Manifest, filename string, src []byte) ([]Resource, error) {
	if len(src) > MaxManifestBytes {
		return nil, fmt.Errorf("%s: %w: the rendered resources are larger than the limit of %d bytes", filename, ErrManifestTooLarge, MaxManifestBytes)
	}
	s, err := newSchema()
	if err != nil {
		return nil, err
	}
	p := &loader{s: s, filename: filename, empty: s.ctx.CompileString("{}")}
	filePos := Position{File: filename}
	f, err := cueyaml.Extract(filename, src)
	if err != nil {
		p.syntaxErrors(err)
		return nil, p.errs.err()
	}
	list := s.ctx.BuildFile(f)
	if err := list.Err(); err != nil {
		p.cueErrors(err, "", filePos, cue.Value{}, cue.Value{})
		return nil, p.errs.err()
	}
	if k := list.IncompleteKind(); k == cue.NullKind || k == cue.TopKind {
		return nil, Errors{{Pos: filePos, Path: "resources", Message: "the template rendered no resources", Err: ErrNoResources}}
	}
	if list.IncompleteKind() != cue.ListKind {
		return nil, Errors{{Pos: p.pos(list.Pos(), filePos), Path: "resources",
			Message: fmt.Sprintf("the template must render a list of resources, got %v", list.IncompleteKind())}}
	}
	if n := countResources(list); n > MaxResources {
		return nil, Errors{{Pos: filePos, Path: "resources", Err: ErrTooManyResources,
			Message: fmt.Sprintf("%d resources exceed the limit of %d per manifest; split it with apply resources", n, MaxResources)}}
	}
	if len(m.Defaults) > 0 {
		p.defaults = map[string][]field{}
		for _, typ := range slices.Sorted(maps.Keys(m.Defaults)) {
			def, ok := p.s.def(typ)
			if !ok {
				continue // reported when the manifest was parsed
			}
			p.defaults[typ] = p.defaultFields(def, s.ctx.Encode(m.Defaults[typ]), "defaults."+typ, Position{File: m.Path})
		}
	}
	rs := p.resources(list, nil, "resources")
	if err := p.errs.sorted(); err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, Errors{{Pos: filePos, Path: "resources", Message: "the template rendered no resources", Err: ErrNoResources}}
	}
	return rs, nil
}

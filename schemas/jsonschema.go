package schemas

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/encoding/jsonschema"
)

// JSONSchemaID is the $id of the manifest JSON Schema JSONSchema returns.
const JSONSchemaID = "https://manifold.run/schemas/manifest.json"

// JSONSchema returns a JSON Schema (draft 2020-12) of manifests, generated
// from the CUE schemas, for editors (the YAML language server): the top
// level, resources in the block shape ({TYPE: [{NAME: {...}}]}) and the
// flat shape ({type: TYPE, name: NAME, ...}) with each type's closed set
// of properties, and manifest-level defaults. It checks shapes and
// property names and values; what only Go checks (references, durations,
// exclusive properties) is left to `manifold validate`.
func JSONSchema() ([]byte, error) {
	s, err := newSchema()
	if err != nil {
		return nil, err
	}
	defs := map[string]any{}
	gen := func(v cue.Value) (map[string]any, error) {
		expr, err := jsonschema.Generate(v, &jsonschema.GenerateConfig{})
		if err != nil {
			return nil, err
		}
		b, err := s.ctx.BuildExpr(expr).MarshalJSON()
		if err != nil {
			return nil, err
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, err
		}
		openStructs(out)
		if d, ok := out["$defs"].(map[string]any); ok {
			maps.Copy(defs, d)
			delete(out, "$defs")
		}
		delete(out, "$schema")
		return out, nil
	}
	manifest, err := gen(s.manifest)
	if err != nil {
		return nil, fmt.Errorf("schemas: json schema of #Manifest: %w", err)
	}
	typeRefs := map[string]string{}
	for _, t := range s.typeNames() {
		def, ok := s.def(t)
		if !ok {
			return nil, fmt.Errorf("schemas: json schema of %s: %w", t, s.failed[t])
		}
		root, err := gen(def)
		if err != nil {
			return nil, fmt.Errorf("schemas: json schema of %s: %w", t, err)
		}
		ref, _ := root["$ref"].(string)
		if !strings.HasPrefix(ref, "#/$defs/") {
			return nil, fmt.Errorf("schemas: json schema of %s: no definition", t)
		}
		typeRefs[t] = strings.TrimPrefix(ref, "#/$defs/")
	}
	inlineEmbedded(defs)
	if d, ok := defs["Manifest"].(map[string]any); ok && manifest["$ref"] == "#/$defs/Manifest" {
		manifest = d
		delete(defs, "Manifest")
	}

	var entries []any
	defaults := map[string]any{}
	for _, t := range slices.Sorted(maps.Keys(typeRefs)) {
		def, _ := defs[typeRefs[t]].(map[string]any)
		if _, ok := def["properties"].(map[string]any); !ok {
			b, _ := json.Marshal(def)
			return nil, fmt.Errorf("schemas: json schema of %s: no properties: %.300s", t, b)
		}
		block, flat, single := shapes(t, def)
		defs["block."+t], defs["flat."+t], defs["single."+t] = block, flat, single
		entries = append(entries, map[string]any{
			"type": "object", "additionalProperties": false, "required": []any{t},
			"properties": map[string]any{t: map[string]any{"anyOf": []any{
				map[string]any{
					"type": "array",
					"items": map[string]any{"type": "object", "minProperties": 1, "maxProperties": 1,
						"additionalProperties": map[string]any{"anyOf": []any{map[string]any{"$ref": "#/$defs/block." + t}, map[string]any{"type": "null"}}}},
				},
				map[string]any{"$ref": "#/$defs/single." + t},
			}}},
		}, map[string]any{"$ref": "#/$defs/flat." + t})
		defaults[t] = map[string]any{"$ref": "#/$defs/block." + t}
	}
	resources := map[string]any{"type": "array", "items": map[string]any{"anyOf": entries}}
	defaultsSchema := map[string]any{"type": "object", "additionalProperties": false, "properties": defaults}
	setProps := func(obj map[string]any) {
		props, _ := obj["properties"].(map[string]any)
		if props == nil {
			return
		}
		keep := func(key string, v any) {
			if old, ok := props[key].(map[string]any); ok {
				if d, ok := old["description"]; ok {
					v.(map[string]any)["description"] = d
				}
			}
			props[key] = v
		}
		keep("resources", maps.Clone(resources))
		keep("defaults", maps.Clone(defaultsSchema))
	}
	setProps(manifest)
	if props, ok := manifest["properties"].(map[string]any); ok {
		if ccm, ok := props["ccm"].(map[string]any); ok {
			setProps(ccm)
		}
	}
	out := map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"$id":     JSONSchemaID,
		"title":   "manifold manifest",
		"$defs":   defs,
	}
	for k, v := range manifest {
		if k != "$ref" {
			out[k] = v
		}
	}
	return json.MarshalIndent(out, "", "  ")
}

// inlineEmbedded merges embedded definitions into the definitions that
// embed them: CUE's generator writes an embedding as a "$ref" next to
// "properties" and "additionalProperties": false, which in JSON Schema
// would refuse the embedded properties.
func inlineEmbedded(defs map[string]any) {
	var inline func(obj map[string]any, depth int)
	inline = func(obj map[string]any, depth int) {
		// Several embeddings: allOf of references and one closed object.
		if all, ok := obj["allOf"].([]any); ok && depth <= 8 {
			merged := map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{}}
			for _, m := range all {
				mo, _ := m.(map[string]any)
				if mo == nil {
					return
				}
				if _, ok := mo["properties"]; !ok {
					ref, _ := mo["$ref"].(string)
					if mo, _ = defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any); mo == nil {
						return
					}
					if _, ok := mo["properties"]; !ok {
						return // not an object's embedding
					}
				}
				mo = maps.Clone(mo)
				inline(mo, depth+1)
				mp, _ := mo["properties"].(map[string]any)
				for k, v := range mp {
					merged["properties"].(map[string]any)[k] = v
				}
				if r, ok := mo["required"].([]any); ok {
					req, _ := merged["required"].([]any)
					merged["required"] = append(req, r...)
				}
				if d, ok := mo["description"]; ok && merged["description"] == nil {
					merged["description"] = d
				}
			}
			clear(obj)
			maps.Copy(obj, merged)
			return
		}
		ref, _ := obj["$ref"].(string)
		props, ok := obj["properties"].(map[string]any)
		if !ok || ref == "" || depth > 8 {
			return
		}
		emb, _ := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		if emb == nil {
			return
		}
		inline(emb, depth+1)
		if ep, ok := emb["properties"].(map[string]any); ok {
			for k, v := range ep {
				if _, set := props[k]; !set {
					props[k] = v
				}
			}
		}
		req, _ := obj["required"].([]any)
		if er, ok := emb["required"].([]any); ok {
			for _, r := range er {
				if !slices.Contains(req, r) {
					req = append(req, r)
				}
			}
		}
		if len(req) > 0 {
			obj["required"] = req
		}
		delete(obj, "$ref")
	}
	for _, d := range defs {
		if obj, ok := d.(map[string]any); ok {
			inline(obj, 0)
		}
	}
}

// shapes derives a type's block-shape properties (no name, no type: the
// name is the entry's key), flat-shape object (type: the type's name) and
// single-resource object (CCM's {TYPE: {name: NAME, ...}}: a name, no
// type) from its definition.
func shapes(typ string, def map[string]any) (block, flat, single map[string]any) {
	props, _ := def["properties"].(map[string]any)
	req, _ := def["required"].([]any)
	block = maps.Clone(def)
	bp := maps.Clone(props)
	delete(bp, "name")
	delete(bp, "type")
	block["properties"] = bp
	var breq []any
	for _, r := range req {
		if r != "name" {
			breq = append(breq, r)
		}
	}
	delete(block, "required")
	if len(breq) > 0 {
		block["required"] = breq
	}
	flat = maps.Clone(def)
	fp := maps.Clone(props)
	fp["type"] = map[string]any{"const": typ}
	flat["properties"] = fp
	freq := slices.Clone(req)
	for _, r := range []any{"type", "name"} {
		if !slices.Contains(freq, r) {
			freq = append(freq, r)
		}
	}
	flat["required"] = freq
	single = maps.Clone(def)
	sp := maps.Clone(props)
	delete(sp, "type")
	single["properties"] = sp
	sreq := slices.DeleteFunc(slices.Clone(req), func(r any) bool { return r == "type" })
	if !slices.Contains(sreq, any("name")) {
		sreq = append(sreq, "name")
	}
	single["required"] = sreq
	return block, flat, single
}

// openStructs repairs what CUE's generator writes for an open struct
// ({...}): `"const": {}`, which would accept only an empty map.
func openStructs(v any) {
	switch v := v.(type) {
	case map[string]any:
		if c, ok := v["const"].(map[string]any); ok && len(c) == 0 {
			delete(v, "const")
			v["type"] = "object"
		}
		for _, e := range v {
			openStructs(e)
		}
	case []any:
		for _, e := range v {
			openStructs(e)
		}
	}
}

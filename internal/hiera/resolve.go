package hiera

import (
	"fmt"

	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// DefaultEntry is the hierarchy used when a manifest gives no order, as in
// CCM: an override named "default" applies to every host.
const DefaultEntry = "default"

// Resolve returns the data of one host:
//
//  1. data, with every template in its values rendered over facts (only
//     facts are in scope: lookup('facts.…'); a missing key without a
//     default is an error naming the key);
//  2. each entry of hierarchy.Order is rendered over facts with
//     template.RenderEntry: a missing fact renders empty, and an entry
//     whose expressions all render empty is skipped; a rendered entry
//     applies when overrides has a section of that name (rendered like
//     data). With MergeFirst (the default) only the first applying section
//     is used and its top-level keys replace data's (CCM's shallow merge);
//     with MergeDeep every applying section is merged in order (later
//     entries win), maps recursively and lists concatenated (Merge);
//  3. run (the run's --data and --data-file) is merged last with Override:
//     it always wins, lists included.
//
// No input is modified.
func Resolve(data map[string]any, hierarchy schemas.Hierarchy, overrides map[string]map[string]any, facts, run map[string]any) (map[string]any, error) {
	mode := hierarchy.Merge
	if mode == "" {
		mode = schemas.MergeFirst
	}
	if mode != schemas.MergeFirst && mode != schemas.MergeDeep {
		return nil, fmt.Errorf("%w %q: use %q or %q", ErrMerge, mode, schemas.MergeFirst, schemas.MergeDeep)
	}
	scope := template.Scope{Facts: facts}
	base, err := renderSection("data", data, scope)
	if err != nil {
		return nil, err
	}
	order := hierarchy.Order
	if len(order) == 0 {
		order = []string{DefaultEntry}
	}
	for i, entry := range order {
		key, ok, err := template.RenderEntry(entry, scope)
		if err != nil {
			return nil, &EntryError{Index: i, Entry: entry, Err: err}
		}
		section, found := overrides[key]
		if !ok || !found {
			continue
		}
		rendered, err := renderSection("overrides."+key, section, scope)
		if err != nil {
			return nil, err
		}
		if mode == schemas.MergeFirst {
			base = shallow(base, rendered)
			break
		}
		base = Merge(base, rendered)
	}
	return Override(base, run), nil
}

// renderSection renders the templates in a data section over facts.
func renderSection(name string, section map[string]any, scope template.Scope) (map[string]any, error) {
	if section == nil {
		return map[string]any{}, nil
	}
	out, err := template.RenderValue(section, scope)
	if err != nil {
		return nil, fmt.Errorf("%s.%w", name, err)
	}
	return out.(map[string]any), nil
}

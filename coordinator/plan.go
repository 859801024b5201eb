package coordinator

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/builtin"

	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// Plan is a manifest ready to run: data resolved, names, aliases and
// references rendered and checked, and the dependency graph built.
type Plan struct {
	Manifest *schemas.Manifest
	// Data is the run's resolved data: the manifest's data with the
	// overrides merged over it.
	Data map[string]any
	// Requires[i] are the resources i requires (skip i when one fails).
	Requires [][]int
	// Subscribes[i] are the resources i subscribes to (refresh i when one
	// changed; skip i when one fails).
	Subscribes [][]int
	// External[i] are references of resource i to resources of ancestor
	// manifests (already finished); ExternalSubscribes[i] the subscribed
	// ones among them.
	External           map[int][]string
	ExternalSubscribes map[int][]string
	// After[i] is the resource i waits for by declaration order, -1 for
	// none (ordering: graph, or the first resource). It does not propagate
	// failure.
	After []int
}

// Prepare resolves a manifest's data with overrides (which always win),
// renders the names, aliases and references of its resources from that
// data (the coordinator's share of templating; other properties are
// rendered on workers), checks references and properties and builds the
// graph. The manifest is modified in place.
func Prepare(m *schemas.Manifest, overrides map[string]any) (*Plan, error) {
	return PrepareWith(m, PrepareOpts{Overrides: overrides})
}

// PrepareOpts are the inputs of PrepareWith beyond the manifest.
type PrepareOpts struct {
	// ApplyData is the data property of the apply resource that started
	// this (child) manifest: merged over the manifest's own data.
	ApplyData map[string]any
	// Overrides are the run's external data overrides: merged last, they
	// always win.
	Overrides map[string]any
	// External accepts references to resources outside the manifest (its
	// ancestors' resources in the same session). Nil accepts none.
	External func(ref string) bool
}

// PrepareWith is Prepare for child manifests: data in three layers
// (manifest, apply resource, run overrides) and references to ancestors.
func PrepareWith(m *schemas.Manifest, o PrepareOpts) (*Plan, error) {
	data := MergeData(MergeData(m.Data, o.ApplyData), o.Overrides)
	scope := template.Scope{Data: data}
	render := func(r *schemas.Resource, field string, s *string) error {
		if !template.HasTemplate(*s) {
			return nil
		}
		v, err := template.Render(*s, scope)
		if err != nil {
			return &schemas.Error{Pos: r.Pos, Path: r.Ref() + "." + field, Message: err.Error()}
		}
		*s = fmt.Sprint(v)
		return nil
	}
	var errs schemas.Errors
	for i := range m.Resources {
		r := &m.Resources[i]
		check := func(err error) {
			if err != nil {
				errs = append(errs, err.(*schemas.Error))
			}
		}
		check(render(r, "name", &r.Name))
		check(render(r, "alias", &r.Alias))
		for j := range r.Require {
			check(render(r, fmt.Sprintf("require[%d]", j), &r.Require[j]))
		}
		for j := range r.Subscribe {
			check(render(r, fmt.Sprintf("subscribe[%d]", j), &r.Subscribe[j]))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if err := schemas.CheckReferencesWith(m, o.External); err != nil {
		return nil, err
	}
	if err := checkProperties(m, scope); err != nil {
		return nil, err
	}
	p := &Plan{
		Manifest:   m,
		Data:       data,
		Requires:   make([][]int, len(m.Resources)),
		Subscribes: make([][]int, len(m.Resources)),
		After:      make([]int, len(m.Resources)),
		External:   map[int][]string{},

		ExternalSubscribes: map[int][]string{},
	}
	for i, r := range m.Resources {
		p.After[i] = -1
		if m.Ordering != schemas.OrderingGraph && i > 0 {
			p.After[i] = i - 1
		}
		for _, ref := range r.Require {
			if j, ok := m.Lookup(ref); ok {
				p.Requires[i] = append(p.Requires[i], j)
			} else { // CheckReferencesWith proved it is an ancestor's
				p.External[i] = append(p.External[i], ref)
			}
		}
		for _, ref := range r.Subscribe {
			if j, ok := m.Lookup(ref); ok {
				p.Subscribes[i] = append(p.Subscribes[i], j)
			} else {
				p.External[i] = append(p.External[i], ref)
				p.ExternalSubscribes[i] = append(p.ExternalSubscribes[i], ref)
			}
		}
	}
	return p, nil
}

// registry is used to validate properties before anything runs; the
// coordinator never executes what it builds. workerTypes are its types.
var (
	registry    = builtin.Registry()
	workerTypes = registry.Types()
)

// checkProperties validates each resource's properties with its type's
// Validate, rendering templates from data first, so that bad input fails
// the run before its first task. Properties whose templates need the
// worker's facts or environment are validated on the worker instead. A
// missing data key is an error here already.
func checkProperties(m *schemas.Manifest, scope template.Scope) error {
	var errs schemas.Errors
	for _, r := range m.Resources {
		if !slices.Contains(workerTypes, r.Type) {
			continue // handled by the coordinator (apply) or not a worker type
		}
		spec, err := resources.RenderSpec(r, scope)
		if err != nil {
			var missing *template.MissingKeyError
			if errors.As(err, &missing) && strings.HasPrefix(missing.Path, "data.") {
				errs = append(errs, &schemas.Error{Pos: r.Pos, Path: r.Path, Message: err.Error()})
			}
			continue
		}
		if _, err := registry.New(spec); err != nil {
			errs = append(errs, &schemas.Error{Pos: r.Pos, Path: r.Path, Message: err.Error()})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// MergeData returns a deep copy of base with over merged into it: maps
// merge key by key, any other value in over replaces base's.
func MergeData(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = deepCopy(v)
	}
	for k, v := range over {
		if bm, ok := out[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				out[k] = MergeData(bm, om)
				continue
			}
		}
		out[k] = deepCopy(v)
	}
	return out
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := maps.Clone(v)
		for k, x := range m {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, x := range v {
			s[i] = deepCopy(x)
		}
		return s
	default:
		return v
	}
}

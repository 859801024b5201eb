package resources

import (
	"fmt"

	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// RenderSpec renders the templates in a manifest resource's ensure, provider
// and type-specific properties against scope and returns the Spec to build.
// The name is taken as it is: the coordinator renders names from data.
// Errors name the resource and the property:
// `file#/etc/motd: content: lookup "data.port": key not found`; they wrap
// *template.MissingKeyError, *template.ExprError or *template.SyntaxError.
func RenderSpec(r schemas.Resource, scope template.Scope) (Spec, error) {
	spec := Spec{Type: r.Type, Name: r.Name}
	for _, f := range []struct {
		name string
		in   string
		out  *string
	}{
		{"ensure", r.Ensure, &spec.Ensure},
		{"provider", r.Provider, &spec.Provider},
	} {
		v, err := template.Render(f.in, scope)
		if err != nil {
			return Spec{}, fmt.Errorf("%s: %s: %w", r.Ref(), f.name, err)
		}
		s, ok := v.(string)
		if !ok {
			return Spec{}, fmt.Errorf("%s: %s: rendered to %T, want a string", r.Ref(), f.name, v)
		}
		*f.out = s
	}
	props, err := template.RenderValue(r.Properties, scope)
	if err != nil {
		return Spec{}, fmt.Errorf("%s: %w", r.Ref(), err)
	}
	if props != nil {
		spec.Properties = props.(map[string]any)
	}
	return spec, nil
}

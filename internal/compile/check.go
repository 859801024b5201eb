package compile

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// registry validates properties before anything runs; nothing it builds
// is executed here. workerTypes are its types.
var (
	registry    = builtin.Registry()
	workerTypes = registry.Types()
)

// checkSyntax checks every template of every resource (names, references,
// ensure, provider, control, health checks, properties) without
// evaluating it: syntax and function names need no data or facts. In the
// same walk it lists, in order, the resources whose properties or health
// checks may name a file (namesFiles), for checkFiles and templateFiles.
func checkSyntax(m *schemas.Manifest) (schemas.Errors, []int) {
	var errs schemas.Errors
	var files []int
	for i := range m.Resources {
		r := &m.Resources[i]
		add := func(field string, err error) {
			if err == nil {
				return
			}
			var pe *template.PathError
			if errors.As(err, &pe) {
				field, err = field+"."+pe.Path, pe.Err
			}
			errs = append(errs, &schemas.Error{Pos: r.Pos, Path: r.Path + "." + field, Message: err.Error(), Err: err})
		}
		add("name", template.Check(r.Name))
		add("alias", template.Check(r.Alias))
		add("ensure", template.Check(r.Ensure))
		add("provider", template.Check(r.Provider))
		for j, ref := range r.Require {
			add("require["+strconv.Itoa(j)+"]", template.Check(ref))
		}
		for j, ref := range r.Subscribe {
			add("subscribe["+strconv.Itoa(j)+"]", template.Check(ref))
		}
		if c := r.Control; c != nil {
			add("control.if", template.Check(guard(c.If)))
			add("control.unless", template.Check(guard(c.Unless)))
		}
		named := false
		for j, hc := range r.HealthChecks {
			add("health_checks["+strconv.Itoa(j)+"]", template.CheckValue(hc))
			if rules, ok := hc["goss_rules"]; ok {
				add("health_checks["+strconv.Itoa(j)+"].goss_rules", template.CheckKeys(rules))
			}
			named = named || mayNameFiles(hc)
		}
		valid, names := propertiesValid(r.Properties)
		if !valid {
			// Reported in key order; only a resource with an error pays
			// for sorting its keys.
			for _, k := range sortedKeys(r.Properties) {
				add(k, template.CheckValue(r.Properties[k]))
			}
		}
		if named || names {
			files = append(files, i)
		}
	}
	return errs, files
}

// propertiesValid reports whether every property's templates are valid,
// and whether one may name a file (mayNameFiles; not known when invalid).
func propertiesValid(props map[string]any) (valid, namesFiles bool) {
	for _, v := range props {
		if template.CheckValue(v) != nil {
			return false, false
		}
		namesFiles = namesFiles || mayNameFiles(v)
	}
	return true, namesFiles
}

// guard is a control expression as the worker evaluates it: a bare
// expression is wrapped in template braces.
func guard(expr string) string {
	if expr == "" || template.HasTemplate(expr) {
		return expr
	}
	return "{{ " + expr + " }}"
}

// checkProperties validates each resource's properties as they will be
// decoded when it runs: a worker type's with its Validate (through the
// registry), an apply's as ApplyProps. Templates are rendered from scope
// first; a property whose template needs what only the worker has (its
// facts, environment or files) is checked there instead, but a missing
// data key is an error here already.
// later says which rendering errors are left for later (needsWorker, or
// Opts.later in a per-host compilation).
//
// The resources are checked side by side, in runs of at least
// minPropertyChecks, on up to GOMAXPROCS goroutines, each with a reusable
// scope of its own (Scope.Reusable), when no template may read a file
// (readsFiles false): a file read is told to scope.OnRead, which bundles
// it, in the order of the reads. The errors are those of checking one
// resource after another, in the same order.
func checkProperties(m *schemas.Manifest, scope template.Scope, readsFiles bool, later func(error) bool) schemas.Errors {
	rs := m.Resources
	parts := min(runtime.GOMAXPROCS(0), len(rs)/minPropertyChecks)
	if parts < 2 || readsFiles {
		return checkPropertiesOf(rs, scope.Reusable(), later)
	}
	found := make([]schemas.Errors, parts)
	var wg sync.WaitGroup
	for k := range parts {
		part := rs[k*len(rs)/parts : (k+1)*len(rs)/parts]
		wg.Go(func() { found[k] = checkPropertiesOf(part, scope.Reusable(), later) })
	}
	wg.Wait()
	var errs schemas.Errors
	for _, e := range found {
		errs = append(errs, e...)
	}
	return errs
}

// minPropertyChecks is the fewest resources checkProperties checks on a
// goroutine of their own: fewer cost more to hand over than to check (a
// resource's properties check is some 1.5 µs).
const minPropertyChecks = 512

// checkPropertiesOf is checkProperties of rs, one after another.
func checkPropertiesOf(rs []schemas.Resource, scope template.Scope, later func(error) bool) schemas.Errors {
	var errs schemas.Errors
	add := func(r schemas.Resource, err error) {
		errs = append(errs, &schemas.Error{Pos: r.Pos, Path: r.Path, Message: err.Error(), Err: err})
	}
	for _, r := range rs {
		switch {
		case r.Type == "apply":
			rendered, err := template.RenderValue(r.Properties, scope)
			if err != nil {
				if !later(err) {
					add(r, fmt.Errorf("%s: %w", r.Ref(), err))
				}
				continue
			}
			var p ApplyProps
			if m, ok := rendered.(map[string]any); ok {
				if err := resources.DecodeProperties(m, &p); err != nil {
					add(r, fmt.Errorf("%s: %w", r.Ref(), err))
				}
			}
		case slices.Contains(workerTypes, r.Type):
			spec, err := resources.RenderSpec(r, scope)
			if err != nil {
				if !later(err) {
					add(r, err)
				}
				continue
			}
			if _, err := registry.New(spec); err != nil {
				add(r, err)
			}
		}
	}
	return errs
}

// needsWorker reports whether a rendering error may not happen where the
// resource runs: anything but a missing data key (data is the same
// everywhere; facts, environment and files are the worker's).
func needsWorker(err error) bool {
	// A bound exceeded over the data (a recursion that does not end) is
	// the manifest's fault wherever it runs.
	if errors.Is(err, template.ErrLimit) || strings.Contains(err.Error(), template.ErrLimit.Error()) {
		return false
	}
	var missing *template.MissingKeyError
	if errors.As(err, &missing) {
		return !strings.HasPrefix(strings.ToLower(missing.Path), "data.")
	}
	var syntax *template.SyntaxError
	return !errors.As(err, &syntax)
}

// ApplyProps are the properties of an apply resource beyond the common
// ones, decoded as the coordinator uses them.
type ApplyProps struct {
	// Noop puts the child run in noop mode (it never weakens the parent's).
	Noop bool `json:"noop"`
	// HealthCheckOnly puts the child run in health-check mode.
	HealthCheckOnly bool `json:"health_check_only"`
	// AllowApply false forbids apply resources in the child manifest; nil
	// is the default, true.
	AllowApply *bool `json:"allow_apply"`
	// Data is merged over the child manifest's data.
	Data map[string]any `json:"data"`
}

// DecodeApply renders an apply resource's properties over scope and
// decodes them: a property of the wrong type (noop: "yes") is an error
// naming it.
func DecodeApply(props map[string]any, scope template.Scope) (ApplyProps, error) {
	var p ApplyProps
	rendered, err := template.RenderValue(props, scope)
	if err != nil {
		return p, err
	}
	if m, ok := rendered.(map[string]any); ok {
		err = resources.DecodeProperties(m, &p)
	}
	return p, err
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

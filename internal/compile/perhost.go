package compile

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/manifold-run/manifold/internal/hiera"
	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// Per-host compilation. A fleet run (each worker, where) and an assignment
// are compiled twice:
//
//   - centrally, before anything runs, with Opts.PerHost: the hosts'
//     facts are not known, so what depends on them (the data a hierarchy
//     keyed on facts selects, names, aliases, references and properties
//     that look facts or such data up) is left for later, and everything
//     else (syntax, schema, template syntax, data annotations of a
//     hierarchy that needs no facts, references that resolve without
//     facts, properties) is checked as for any run;
//   - for each host, with Opts.HostFacts and that host's facts: the
//     hierarchy is resolved and names, aliases, references and properties
//     are rendered over them, and a template that fails there is an error
//     of that host's run naming file, line and field.

// late is what a central (PerHost) compilation could not know: the data
// keys a hierarchy keyed on facts (or a data template over facts) may
// give another value on each host, and the name patterns of the resources
// whose names were left unrendered.
type late struct {
	// keys are the top-level data keys unknown centrally: a missing data
	// key under one of them is the host's to report, not an error here.
	keys map[string]bool
	// names are the deferred names and aliases, "type#pattern", where a
	// pattern is the template with every {{ … }} a wildcard.
	names []string
}

// lateData resolves a manifest's data for a central compilation of a
// per-host run. A hierarchy whose entries need no facts is resolved as
// usual (over no facts). Otherwise the top-level keys any override section
// sets, and the data keys whose templates need facts, are left out: they
// belong to each host. The apply resource's and the run's data are merged
// over what is left (they are the same on every host).
func lateData(m *schemas.Manifest, o Opts) (map[string]any, *late, error) {
	lt := &late{}
	o.Facts = nil
	if !factKeyed(m.Hierarchy) {
		data, err := Data(m, o)
		if err == nil {
			return data, lt, nil
		}
		if !factDependent(m) {
			return nil, nil, err
		}
	}
	drop := map[string]bool{}
	for _, section := range m.Overrides {
		for k := range section {
			drop[k] = true
		}
	}
	lt.keys = drop
	base := map[string]any{}
	var errs schemas.Errors
	for k, v := range m.Data {
		if drop[k] {
			continue
		}
		out, err := template.RenderValue(v, template.Scope{Deadline: o.Deadline})
		switch {
		case err == nil:
			base[k] = out
		case needsWorker(err) || isMissingData(err):
			drop[k] = true // over facts: the host's
		default:
			errs = append(errs, &schemas.Error{Pos: schemas.Position{File: m.Path}, Path: "data." + k, Message: err.Error(), Err: err})
		}
	}
	if len(errs) > 0 {
		return nil, nil, errs
	}
	return MergeData(MergeData(base, o.ApplyData), o.Run), lt, nil
}

// factKeyed reports whether a hierarchy selects its overrides by facts:
// an entry holding a template (its only scope is the facts).
func factKeyed(h schemas.Hierarchy) bool {
	for _, e := range h.Order {
		if template.HasTemplate(e) {
			return true
		}
	}
	return false
}

// factDependent reports whether resolving m's data needs facts: data or
// an override section that looks one up.
func factDependent(m *schemas.Manifest) bool {
	_, err := hiera.Resolve(m.Data, m.Hierarchy, m.Overrides, nil, nil)
	var missing *template.MissingKeyError
	return err != nil && errors.As(err, &missing)
}

// isMissingData reports whether err is a data key not found.
func isMissingData(err error) bool {
	var missing *template.MissingKeyError
	return errors.As(err, &missing) && strings.HasPrefix(strings.ToLower(missing.Path), "data.")
}

// isLate reports whether err is a missing data key that is unknown
// centrally (data.K… with K in lt.keys).
func (lt *late) isLate(err error) bool {
	var missing *template.MissingKeyError
	if lt == nil || len(lt.keys) == 0 || !errors.As(err, &missing) {
		return false
	}
	p := missing.Path
	if len(p) < 5 || !strings.EqualFold(p[:5], "data.") {
		return false
	}
	k, _, _ := strings.Cut(p[5:], ".")
	return lt.keys[k]
}

// isMissingFact reports whether err is a fact not found.
func isMissingFact(err error) bool {
	var missing *template.MissingKeyError
	return errors.As(err, &missing) && strings.HasPrefix(strings.ToLower(missing.Path), "facts.")
}

// later reports whether a rendering error belongs to each host rather
// than to this compilation: in a central compilation, what needs facts
// (or data a hierarchy keyed on facts may set); in a host's compilation,
// what only the worker has (its environment and files), never a fact
// the host does not have.
func (o Opts) later(lt *late, err error) bool {
	switch {
	case o.HostFacts:
		return needsWorker(err) && !isMissingFact(err)
	case o.PerHost:
		return needsWorker(err) || lt.isLate(err)
	}
	return needsWorker(err)
}

// renderHostNames renders the names, aliases and references of m's
// resources for a per-host run: over the host's facts and data
// (HostFacts), or, centrally (PerHost), over data, leaving the templates
// that need facts as written and recording their patterns. An apply
// resource's name must render centrally: its child manifest is bundled
// before the run.
func renderHostNames(m *schemas.Manifest, data map[string]any, o Opts, lt *late) schemas.Errors {
	scope := template.Scope{Data: data, Deadline: o.Deadline}
	if o.HostFacts {
		scope.Facts = o.Facts
	}
	var errs schemas.Errors
	render := func(r *schemas.Resource, field string, s *string, name bool) bool {
		if !template.HasTemplate(*s) {
			return true
		}
		v, err := template.Render(*s, scope)
		if err == nil {
			*s = fmt.Sprint(v)
			return true
		}
		e := &schemas.Error{Pos: r.Pos, Path: r.Path + "." + field, Message: r.Ref() + ": " + err.Error(), Err: err}
		if o.PerHost && o.later(lt, err) {
			if r.Type != "apply" || !name {
				return false // each host renders it
			}
			e.Message = fmt.Sprintf("%s: %v: the child manifest is bundled before the run, so an apply resource's name is rendered from data: %v",
				r.Ref(), ErrFactInName, err)
			e.Err = ErrFactInName
		}
		errs = append(errs, e)
		return true
	}
	for i := range m.Resources {
		r := &m.Resources[i]
		if !render(r, "name", &r.Name, true) {
			lt.names = append(lt.names, r.Type+"#"+namePattern(r.Name))
		}
		if !render(r, "alias", &r.Alias, false) {
			lt.names = append(lt.names, r.Type+"#"+namePattern(r.Alias))
		}
		for j := range r.Require {
			render(r, fmt.Sprintf("require[%d]", j), &r.Require[j], false)
		}
		for j := range r.Subscribe {
			render(r, fmt.Sprintf("subscribe[%d]", j), &r.Subscribe[j], false)
		}
	}
	return errs
}

// namePattern turns a name template into a path.Match pattern: each
// {{ … }} or ${ … } becomes *, the rest is matched literally.
func namePattern(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		i := strings.Index(s, "{{")
		j := strings.Index(s, "${")
		if i < 0 || (j >= 0 && j < i) {
			i = j
		}
		if i < 0 {
			b.WriteString(escapePattern(s))
			break
		}
		b.WriteString(escapePattern(s[:i]))
		closer := "}}"
		if s[i] == '$' {
			closer = "}"
		}
		end := strings.Index(s[i+2:], closer)
		if end < 0 {
			b.WriteString("*")
			break
		}
		b.WriteString("*")
		s = s[i+2+end+len(closer):]
	}
	return b.String()
}

// escapePattern escapes path.Match's special characters.
func escapePattern(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}

// external accepts, in a central compilation, the references left to the
// hosts: those still templated and those a deferred name may render to
// (file#/etc/app/n1.conf for file#/etc/app/{{ lookup('facts.node') }}.conf).
// A reference that can match no resource is still an error here.
func (lt *late) external(next func(string) bool) func(string) bool {
	return func(ref string) bool {
		if next != nil && next(ref) {
			return true
		}
		if template.HasTemplate(ref) {
			return true
		}
		typ, name, _ := strings.Cut(ref, "#")
		for _, p := range lt.names {
			ptyp, pat, _ := strings.Cut(p, "#")
			if ptyp != typ {
				continue
			}
			// * does not cross a / in path.Match: a fact may hold one.
			if ok, _ := path.Match(strings.ReplaceAll(pat, "/", "?"), strings.ReplaceAll(name, "/", "?")); ok {
				return true
			}
		}
		return false
	}
}

// data resolves m's data for this compilation: for the host of o.Facts
// (Data), or centrally for a per-host run (lateData).
func (o Opts) data(m *schemas.Manifest) (map[string]any, *late, error) {
	if o.PerHost {
		return lateData(m, o)
	}
	data, err := Data(m, o)
	return data, &late{}, err
}

// renderNames renders names, aliases and references: from data alone
// unless the compilation is per host.
func (o Opts) renderNames(m *schemas.Manifest, data map[string]any, lt *late) schemas.Errors {
	if o.PerHost || o.HostFacts {
		return renderHostNames(m, data, o, lt)
	}
	return renderNames(m, data, o.Deadline)
}

// external is the reference check's acceptance of references outside the
// manifest: o.External, and centrally in a per-host compilation those
// left to the hosts.
func (o Opts) external(lt *late) func(string) bool {
	if !o.PerHost {
		return o.External
	}
	return lt.external(o.External)
}

package compile

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// Plan is a manifest ready to run: data resolved, names, aliases and
// references rendered and checked, and the dependency graph built.
type Plan struct {
	Manifest *schemas.Manifest
	// Data is the run's resolved data: the manifest's data, the hierarchy's
	// overrides, the apply resource's data and the run's data, in that
	// order.
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
	// PreMessage and PostMessage are the manifest's pre_message and
	// post_message, rendered over data and facts: printed before the run
	// and, when no resource failed, after it.
	PreMessage, PostMessage string

	// namingFiles are the indexes of the resources whose properties or
	// health checks may name a file (checkSyntax), when namingKnown.
	namingFiles []int
	namingKnown bool
}

// mayNameFiles reports whether resource i's properties or health checks
// may name a file.
func (p *Plan) mayNameFiles(i int) bool {
	if !p.namingKnown {
		return namesFiles(&p.Manifest.Resources[i])
	}
	_, ok := slices.BinarySearch(p.namingFiles, i)
	return ok
}

// Opts are the inputs of a compilation beyond the manifest.
type Opts struct {
	// ParseOnce says the process parses these manifests once (validate,
	// render): they are not stored in the schemas' parse cache
	// (schemas.ParseOnce). False for apply, whose coordinator parses the
	// manifest again.
	ParseOnce bool
	// ApplyData is the data property of the apply resource that started
	// this (child) manifest, already rendered: merged over the manifest's
	// data and hierarchy.
	ApplyData map[string]any
	// Run is the run's data (--data, --data-file): merged last, it always
	// wins.
	Run map[string]any
	// Facts are the facts of the host the data is resolved for: hierarchy
	// entries and the templates in data and overrides are rendered over
	// them. Nil is a host with no facts: entries that need one are
	// skipped, and a data value that looks one up is an error.
	Facts map[string]any
	// Source is the manifest's text. When it is YAML, the annotations of
	// its data keys (# @require, # @validate) are checked against the
	// resolved data.
	Source []byte
	// Dir is the manifest's directory on this host, the base of file(),
	// template() and jet() while properties are checked. Empty leaves
	// properties that read files to be checked where they run.
	Dir string
	// External accepts references to resources outside the manifest (its
	// ancestors' resources in the same session). Nil accepts none.
	External func(ref string) bool
	// Files, when set, reads the files of the manifest's directory (paths
	// relative to it) instead of Dir: the coordinator reads them from the
	// run's bundle.
	Files func(name string) ([]byte, error)
	// OnRead, when set, is told of every file a template read while
	// compiling (the bundle builder collects them).
	OnRead func(name string, content []byte) error
	// PerHost compiles centrally a manifest that each host of a fleet run
	// or assignment compiles again with its own facts (HostFacts): Facts
	// are ignored, and what needs them (data a hierarchy keyed on facts
	// may set, names, aliases, references and properties over facts or
	// such data) is left to each host; the rest is checked (perhost.go).
	PerHost bool
	// FactsLater, when set, returns the facts, replacing Facts: Compile
	// calls it (Source and Build once the manifest is parsed), so the
	// caller can gather them meanwhile. It may be called more than once
	// (Build: each manifest of the tree) and must return the same facts.
	FactsLater func() map[string]any
	// HostFacts says Facts are those of the one host the plan runs on (a
	// run pinned to a worker): names, aliases and references may look
	// them up, and a template over a fact the host lacks is an error here.
	HostFacts bool
	// Deadline bounds the templates evaluated while compiling (data,
	// resources_jet_file, messages, names, properties): past it they fail
	// with template.ErrLimit. Zero is Timeout from the start.
	Deadline time.Time
}

// Timeout bounds the template evaluations of one compilation when
// Opts.Deadline is zero: 30s.
const Timeout = 30 * time.Second

// scope is the template scope of a compilation: data, facts and the
// manifest's files.
func (o Opts) scope(data map[string]any) template.Scope {
	return template.Scope{Data: data, Facts: o.Facts, Dir: o.Dir, Files: o.Files, OnRead: o.OnRead, Deadline: o.Deadline}
}

// Source parses the manifest src (named name) and compiles it.
func Source(name string, src []byte, o Opts) (*Plan, error) {
	parse := schemas.ParseUnchecked
	if o.ParseOnce {
		parse = schemas.ParseOnce
	}
	m, err := parse(name, src)
	if err != nil {
		return nil, err
	}
	o.Source = src
	return Compile(m, o)
}

// Compile resolves a parsed manifest's data, renders its names, aliases
// and references, checks templates, references and properties and builds
// the graph. The manifest is modified in place (names rendered). Errors
// are schemas.Errors.
//
// A panic while compiling (a bug) is returned as an error wrapping
// ErrInternal, so that no manifest can crash the process compiling it (a
// coordinator resuming the run would crash again).
func Compile(m *schemas.Manifest, o Opts) (p *Plan, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%w: %s: panic: %v\n%s", ErrInternal, m.Path, r, debug.Stack())
		}
	}()
	if o.FactsLater != nil {
		o.Facts, o.FactsLater = o.FactsLater(), nil
	}
	if o.Deadline.IsZero() {
		o.Deadline = time.Now().Add(Timeout)
	}
	if o.PerHost {
		o.Facts, o.HostFacts = nil, false
	}
	return compileManifest(m, o)
}

// beforeCompile is a test hook.
var beforeCompile = func(*schemas.Manifest) {}

func compileManifest(m *schemas.Manifest, o Opts) (*Plan, error) {
	beforeCompile(m)
	errs, files := checkSyntax(m)
	if len(errs) > 0 {
		return nil, errs
	}
	if errs := checkFiles(m, files, o.scope(nil)); len(errs) > 0 {
		return nil, errs
	}
	data, lt, err := o.data(m)
	if err != nil {
		return nil, err
	}
	if m.ResourcesJetFile != "" {
		if err := expandJetFile(m, o.scope(data)); err != nil {
			return nil, err
		}
		errs, files = checkSyntax(m)
		if len(errs) > 0 {
			return nil, errs
		}
		if errs := checkFiles(m, files, o.scope(nil)); len(errs) > 0 {
			return nil, errs
		}
	}
	pre, post, err := messages(m, o.scope(data))
	if err != nil {
		return nil, err
	}
	if errs := o.renderNames(m, data, lt); len(errs) > 0 {
		return nil, errs
	}
	if err := schemas.CheckReferencesWith(m, o.external(lt)); err != nil {
		return nil, err
	}
	if errs := checkProperties(m, o.scope(data), len(files) > 0, func(err error) bool { return o.later(lt, err) }); len(errs) > 0 {
		return nil, errs
	}
	p := graph(m, data)
	if errs := checkCycles(p); len(errs) > 0 {
		return nil, errs
	}
	p.PreMessage, p.PostMessage = pre, post
	p.namingFiles, p.namingKnown = files, true
	return p, nil
}

// renderNames renders the names, aliases and references of m's resources
// from data (not facts: they are host-independent).
func renderNames(m *schemas.Manifest, data map[string]any, deadline time.Time) schemas.Errors {
	scope := template.Scope{Data: data, Deadline: deadline}
	var errs schemas.Errors
	render := func(r *schemas.Resource, field string, s *string) {
		if !template.HasTemplate(*s) {
			return
		}
		v, err := template.Render(*s, scope)
		if err != nil {
			e := &schemas.Error{Pos: r.Pos, Path: r.Ref() + "." + field, Message: err.Error(), Err: err}
			var missing *template.MissingKeyError
			if errors.As(err, &missing) && !strings.HasPrefix(strings.ToLower(missing.Path), "data.") {
				e.Message, e.Err = fmt.Sprintf("%v: %v", ErrFactInName, err), ErrFactInName
			}
			errs = append(errs, e)
			return
		}
		*s = fmt.Sprint(v)
	}
	for i := range m.Resources {
		r := &m.Resources[i]
		render(r, "name", &r.Name)
		render(r, "alias", &r.Alias)
		for j := range r.Require {
			render(r, fmt.Sprintf("require[%d]", j), &r.Require[j])
		}
		for j := range r.Subscribe {
			render(r, fmt.Sprintf("subscribe[%d]", j), &r.Subscribe[j])
		}
	}
	return errs
}

// graph builds the plan's edges. References were checked: one that names
// no resource of m is an ancestor's.
func graph(m *schemas.Manifest, data map[string]any) *Plan {
	n := len(m.Resources)
	p := &Plan{
		Manifest:   m,
		Data:       data,
		Requires:   make([][]int, n),
		Subscribes: make([][]int, n),
		After:      make([]int, n),
		External:   map[int][]string{},

		ExternalSubscribes: map[int][]string{},
	}
	x := newRefIndex(m)
	for i := range m.Resources {
		r := &m.Resources[i]
		p.After[i] = -1
		if m.Ordering != schemas.OrderingGraph && i > 0 {
			p.After[i] = i - 1
		}
		for _, ref := range r.Require {
			if j, ok := x.lookup(ref); ok {
				p.Requires[i] = append(p.Requires[i], j)
			} else {
				p.External[i] = append(p.External[i], ref)
			}
		}
		for _, ref := range r.Subscribe {
			if j, ok := x.lookup(ref); ok {
				p.Subscribes[i] = append(p.Subscribes[i], j)
			} else {
				p.External[i] = append(p.External[i], ref)
				p.ExternalSubscribes[i] = append(p.ExternalSubscribes[i], ref)
			}
		}
	}
	autoEdges(m, p, x.names)
	return p
}

// refIndex resolves references ("type#name" or "type#alias") to the
// resources of a manifest as schemas.Manifest.Lookup does (the first
// resource of that name, else the first of that alias) from maps made
// once: Lookup scans the resources at each call, which made the graph of
// a manifest of n resources that each require one cost n² steps.
type refIndex struct {
	names, aliases map[refKey]int
}

func newRefIndex(m *schemas.Manifest) refIndex {
	x := refIndex{names: make(map[refKey]int, len(m.Resources))}
	for i := range m.Resources {
		r := &m.Resources[i]
		if k := (refKey{r.Type, r.Name}); !mapHas(x.names, k) {
			x.names[k] = i
		}
		if r.Alias == "" {
			continue
		}
		if x.aliases == nil {
			x.aliases = map[refKey]int{}
		}
		if k := (refKey{r.Type, r.Alias}); !mapHas(x.aliases, k) {
			x.aliases[k] = i
		}
	}
	return x
}

// lookup is Manifest.Lookup.
func (x refIndex) lookup(ref string) (int, bool) {
	typ, name, ok := strings.Cut(ref, "#")
	if !ok {
		return -1, false
	}
	if i, ok := x.names[refKey{typ, name}]; ok {
		return i, true
	}
	if i, ok := x.aliases[refKey{typ, name}]; ok {
		return i, true
	}
	return -1, false
}

func mapHas[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

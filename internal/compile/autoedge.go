package compile

import (
	"fmt"
	"path"
	"slices"

	"github.com/manifold-run/manifold/resources/template"
	"github.com/manifold-run/manifold/schemas"
)

// autoDep is one implicit dependency of a resource: the resource it would
// require (type and name) and why.
type autoDep struct {
	typ, name, why string
}

// ref is the dependency's reference, "type#name".
func (d autoDep) ref() string { return d.typ + "#" + d.name }

// refKey is a reference as a map key: no "type#name" string is built per
// resource to look one up.
type refKey struct{ typ, name string }

// implicitDeps lists what r implicitly depends on, from its name and
// properties alone (templated values are skipped: they are known only
// where the resource runs):
//
//   - file: the file resource of its nearest managed ancestor directory;
//     the user of its owner and the group of its group;
//   - archive: the file resource of extract_parent (or its nearest managed
//     ancestor); the user of its owner and the group of its group;
//   - exec: the file resource of cwd (or its nearest managed ancestor);
//   - user: the groups of gid and groups;
//   - service: the package of the same name.
//
// The dependencies are appended to deps[:0] (a buffer reused across
// resources). near remembers the last directory whose nearest managed
// ancestor was looked for: the files of a manifest are mostly siblings.
func implicitDeps(r *schemas.Resource, files func(dir string) bool, near *nearestDir, deps []autoDep) []autoDep {
	deps = deps[:0]
	str := func(prop string) (string, bool) {
		s, ok := r.Properties[prop].(string)
		if !ok || s == "" || template.HasTemplate(s) {
			return "", false
		}
		return s, true
	}
	dir := func(p, why string, self bool) {
		if !path.IsAbs(p) {
			return
		}
		p = path.Clean(p)
		if !self {
			p = path.Dir(p)
		}
		if found, ok := near.of(p, files); ok {
			deps = append(deps, autoDep{"file", found, why})
		}
	}
	account := func(typ, prop string) {
		if s, ok := str(prop); ok && !isNumeric(s) {
			deps = append(deps, autoDep{typ, s, prop})
		}
	}
	switch r.Type {
	case "file":
		if !template.HasTemplate(r.Name) && r.Name != "/" {
			dir(r.Name, "parent directory", false)
		}
		account("user", "owner")
		account("group", "group")
	case "archive":
		if p, ok := str("extract_parent"); ok {
			dir(p, "extract_parent", true)
		}
		account("user", "owner")
		account("group", "group")
	case "exec":
		if p, ok := str("cwd"); ok {
			dir(p, "cwd", true)
		}
	case "user":
		account("group", "gid")
		if groups, ok := r.Properties["groups"].([]any); ok {
			for _, g := range groups {
				if s, ok := g.(string); ok && s != "" && !template.HasTemplate(s) {
					deps = append(deps, autoDep{"group", s, "groups"})
				}
			}
		}
	case "service":
		deps = append(deps, autoDep{"package", r.Name, "package of the same name"})
	}
	return deps
}

// nearestDir finds the nearest managed directory at or above a clean
// absolute path, remembering the last answer.
type nearestDir struct {
	dir, found string
	ok, known  bool
}

// of returns the nearest of files at or above dir (clean and absolute).
func (n *nearestDir) of(dir string, files func(dir string) bool) (string, bool) {
	if n.known && n.dir == dir {
		return n.found, n.ok
	}
	n.dir, n.found, n.ok, n.known = dir, "", false, true
	for p := dir; ; p = path.Dir(p) {
		if files(p) {
			n.found, n.ok = p, true
			break
		}
		if p == "/" {
			break
		}
	}
	return n.found, n.ok
}

// isNumeric reports whether s holds only decimal digits (a uid or gid):
// a loop, where strings.Trim built its set of digits at every call (2 %
// of the validate of 20,000 files).
func isNumeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// autoEdges adds the implicit dependencies of m's resources to p.Requires
// (so a failure skips the dependent, as a written require does) and lists
// them in each resource's AutoRequire, which `manifold render` prints. An
// edge is added only between resources of the same manifest and target
// (pool), when neither sets autoedge: false, when the dependency is not
// ensure: absent, and when the two are not joined by a require or subscribe already (declaration order alone does not
// propagate failure: the automatic edge is added). An edge that would close a cycle (through requires, subscribes,
// declaration order or another automatic edge) is not added; the resource's
// AutoSkipped says which and why.
//
// byName maps each (type, name) to its first resource (refIndex.names).
func autoEdges(m *schemas.Manifest, p *Plan, byName map[refKey]int) {
	for i := range m.Resources {
		r := &m.Resources[i]
		r.AutoRequire, r.AutoSkipped = nil, nil
	}
	// files reports whether a managed directory (a file resource, not
	// absent, with automatic edges) is named dir, a clean absolute path.
	// Names of path types were cleaned (schemas.CheckReferences) and no
	// two resources of a type share one, so the index answers: no map of
	// the file names is made.
	files := func(dir string) bool {
		i, ok := byName[refKey{"file", dir}]
		if !ok {
			return false
		}
		r := &m.Resources[i]
		return r.Ensure != "absent" && (r.AutoEdge == nil || *r.AutoEdge) && !template.HasTemplate(r.Name)
	}
	var g *reach
	var deps []autoDep
	var near nearestDir
	for i := range m.Resources {
		r := &m.Resources[i]
		if r.AutoEdge != nil && !*r.AutoEdge {
			continue
		}
		deps = implicitDeps(r, files, &near, deps)
		for _, d := range deps {
			j, ok := byName[refKey{d.typ, d.name}]
			if !ok || j == i {
				continue
			}
			dep := &m.Resources[j]
			if (dep.AutoEdge != nil && !*dep.AutoEdge) || dep.Ensure == "absent" || dep.Target != r.Target {
				continue
			}
			if g == nil {
				g = newReach(p)
			}
			if slices.Contains(p.Requires[i], j) || slices.Contains(p.Subscribes[i], j) {
				continue
			}
			if g.dependsOn(j, i) {
				why := "it depends on this resource"
				if m.Ordering != schemas.OrderingGraph && j > i {
					why = "it is declared later (ordering: manifest); declare it first or use ordering: graph"
				}
				r.AutoSkipped = append(r.AutoSkipped, fmt.Sprintf("%s (%s): would close a cycle: %s", d.ref(), d.why, why))
				continue
			}
			p.Requires[i] = append(p.Requires[i], j)
			r.AutoRequire = append(r.AutoRequire, d.ref())
			g.add(i, j)
		}
	}
}

// reach answers "does i depend on j" over a plan's edges (requires,
// subscribes, declaration order), with edges added as it goes. A
// topological order answers most questions at once: what comes earlier in
// it cannot depend on what comes later. The rest (and every question when
// the written edges hold a cycle) is a depth-first search.
type reach struct {
	deps  [][]int
	stamp []int
	round int
	stack []int
	// pos[i] is i's place in a topological order of deps; nil when it is
	// stale (an edge added against it) or there is none (a cycle).
	pos     []int
	acyclic bool
	// chain is declaration order: each resource depends on every earlier
	// one.
	chain bool
	// work counts the search steps since pos went stale: pos is
	// recomputed when they outnumber the resources, so recomputing never
	// costs more than the searches it saves.
	work int
}

func newReach(p *Plan) *reach {
	n := len(p.Requires)
	g := &reach{deps: make([][]int, n), stamp: make([]int, n)}
	for i := range n {
		d := make([]int, 0, len(p.Requires[i])+len(p.Subscribes[i])+1)
		d = append(d, p.Requires[i]...)
		d = append(d, p.Subscribes[i]...)
		if p.After[i] >= 0 {
			d = append(d, p.After[i])
		}
		g.deps[i] = d
		g.chain = g.chain || p.After[i] >= 0
	}
	g.acyclic = true
	g.order()
	return g
}

// order computes pos (Kahn's algorithm, dependencies first), or leaves it
// nil when deps hold a cycle.
func (g *reach) order() {
	n := len(g.deps)
	waiting := make([]int, n)
	dependents := make([][]int, n)
	for i, ds := range g.deps {
		waiting[i] = len(ds)
		for _, d := range ds {
			dependents[d] = append(dependents[d], i)
		}
	}
	queue := make([]int, 0, n)
	for i := range n {
		if waiting[i] == 0 {
			queue = append(queue, i)
		}
	}
	pos := make([]int, n)
	for k := 0; k < len(queue); k++ {
		pos[queue[k]] = k
		for _, e := range dependents[queue[k]] {
			if waiting[e]--; waiting[e] == 0 {
				queue = append(queue, e)
			}
		}
	}
	if len(queue) < n {
		g.acyclic = false
		return
	}
	g.pos = pos
}

// add records that i depends on j.
func (g *reach) add(i, j int) {
	g.deps[i] = append(g.deps[i], j)
	if g.pos != nil && g.pos[j] > g.pos[i] {
		g.pos = nil
	}
}

// dependsOn reports whether from depends on to, directly or not.
func (g *reach) dependsOn(from, to int) bool {
	if g.chain && g.acyclic && from > to {
		return true
	}
	if g.pos == nil && g.acyclic && g.work > len(g.deps) {
		g.order()
		g.work = 0
	}
	if g.pos != nil && g.pos[from] < g.pos[to] {
		return false
	}
	g.round++
	g.stack = append(g.stack[:0], from)
	g.stamp[from] = g.round
	for len(g.stack) > 0 {
		k := g.stack[len(g.stack)-1]
		g.stack = g.stack[:len(g.stack)-1]
		g.work += 1 + len(g.deps[k])
		for _, d := range g.deps[k] {
			if d == to {
				return true
			}
			if g.stamp[d] != g.round {
				g.stamp[d] = g.round
				g.stack = append(g.stack, d)
			}
		}
	}
	return false
}

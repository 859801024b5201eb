package graph

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/internal/compile"
)

// EdgeKind is why one resource runs after another.
type EdgeKind string

const (
	// EdgeOrder is declaration order (ordering: manifest): the resource
	// waits for the one declared before it; a failure does not propagate.
	EdgeOrder EdgeKind = "order"
	// EdgeRequire is a written require: a failure skips the dependent.
	EdgeRequire EdgeKind = "require"
	// EdgeSubscribe is a written subscribe: a change refreshes the
	// subscriber, a failure skips it.
	EdgeSubscribe EdgeKind = "subscribe"
	// EdgeAuto is an automatic edge (a file after its parent directory, a
	// service after its package...): it behaves as a require.
	EdgeAuto EdgeKind = "auto"
)

// MaxDepth is how deep apply children are nested in a graph: deeper ones
// (or a manifest applying itself) are drawn as a plain apply node.
const MaxDepth = 16

// MaxNodes bounds the nodes of one graph, children included: 20,000. A
// plan with more is refused (ErrTooLarge) rather than rendered into a
// picture nobody can read and a layout that takes minutes.
const MaxNodes = 20000

// ErrTooLarge: the graph has more nodes than can be drawn (MaxNodes, or
// MaxSVGNodes for SVG).
var ErrTooLarge = errors.New("graph: too many resources to draw")

// Graph is one manifest's resources and edges.
type Graph struct {
	// Manifest is the manifest's path, as the plan names it.
	Manifest string
	// Nodes are the resources in declaration order.
	Nodes []*Node
	// Edges run from the resource that goes first to the one that waits
	// for it.
	Edges []Edge
}

// Node is one resource.
type Node struct {
	// ID is unique in the whole drawing (children included) and safe as a
	// DOT or Mermaid identifier: "r3", "r3_0" for the first resource of
	// r3's child manifest.
	ID string
	// Ref is the resource's reference, type#name.
	Ref string
	// Type and Name are the resource's.
	Type, Name string
	// Status is the resource's outcome in the run the graph was coloured
	// by (changed, stable, failed, skipped, pending, dispatched,
	// cancelled); empty when not coloured.
	Status string
	// Child is an apply resource's child manifest; nil for other types or
	// when the child's plan is not known.
	Child *Graph
}

// Edge is one ordering constraint between two nodes.
type Edge struct {
	// From goes first; To waits for it.
	From, To string
	Kind     EdgeKind
}

// ChildFunc returns the plan of the child manifest applied by resource i
// of plan p, or nil when it is not known.
type ChildFunc func(p *compile.Plan, i int) *compile.Plan

// FromPlan builds the graph of a plan; child draws apply resources'
// children (nil draws none). External references of a child to its
// ancestors' resources become edges from the ancestor's node. It returns
// ErrTooLarge past MaxNodes.
func FromPlan(p *compile.Plan, child ChildFunc) (*Graph, error) {
	b := &builder{child: child}
	g := b.build(p, "r", nil, 0, nil)
	if b.nodes > MaxNodes {
		return nil, fmt.Errorf("%w: more than %d", ErrTooLarge, MaxNodes)
	}
	return g, nil
}

// FromTree builds the graph of a compiled tree: the entry manifest with
// the child manifests its apply resources name, nested.
func FromTree(t *compile.Tree) (*Graph, error) {
	paths := make(map[*compile.Plan]string, len(t.Plans))
	for name, p := range t.Plans {
		paths[p] = name
	}
	paths[t.Plan] = t.Entry
	return FromPlan(t.Plan, func(p *compile.Plan, i int) *compile.Plan {
		name, ok := paths[p]
		if !ok {
			return nil
		}
		child, err := bundle.Resolve(name, p.Manifest.Resources[i].Name)
		if err != nil {
			return nil
		}
		return t.Plans[child]
	})
}

type builder struct {
	child ChildFunc
	nodes int
}

// build draws plan p with node IDs prefix+index; scope maps the
// references of the ancestors' resources to their node IDs; stack holds
// the plans being drawn above (a manifest applying itself stops there).
func (b *builder) build(p *compile.Plan, prefix string, scope map[string]string, depth int, stack []*compile.Plan) *Graph {
	g := &Graph{Manifest: p.Manifest.Path}
	res := p.Manifest.Resources
	b.nodes += len(res)
	if b.nodes > MaxNodes {
		return g
	}
	id := func(i int) string { return prefix + strconv.Itoa(i) }
	inner := make(map[string]string, len(scope)+len(res))
	for k, v := range scope {
		inner[k] = v
	}
	for i, r := range res {
		inner[r.Ref()] = id(i)
		if r.Alias != "" {
			inner[r.Type+"#"+r.Alias] = id(i)
		}
	}
	for i, r := range res {
		n := &Node{ID: id(i), Ref: r.Ref(), Type: r.Type, Name: r.Name}
		g.Nodes = append(g.Nodes, n)
		if r.Type != "apply" || b.child == nil || depth >= MaxDepth {
			continue
		}
		if c := b.child(p, i); c != nil && c != p && !slices.Contains(stack, c) {
			n.Child = b.build(c, id(i)+"_", inner, depth+1, append(stack, p))
		}
	}
	for i, r := range res {
		auto := map[string]bool{}
		for _, ref := range r.AutoRequire {
			auto[ref] = true
		}
		written := map[int]bool{}
		for _, ref := range r.Require {
			if j, ok := p.Manifest.Lookup(ref); ok {
				written[j] = true
			}
		}
		joined := map[int]bool{}
		for _, j := range p.Requires[i] {
			kind := EdgeRequire
			if !written[j] && auto[res[j].Ref()] {
				kind = EdgeAuto
			}
			g.Edges = append(g.Edges, Edge{From: id(j), To: id(i), Kind: kind})
			joined[j] = true
		}
		for _, j := range p.Subscribes[i] {
			g.Edges = append(g.Edges, Edge{From: id(j), To: id(i), Kind: EdgeSubscribe})
			joined[j] = true
		}
		if j := p.After[i]; j >= 0 && !joined[j] {
			g.Edges = append(g.Edges, Edge{From: id(j), To: id(i), Kind: EdgeOrder})
		}
		subscribed := map[string]bool{}
		for _, ref := range p.ExternalSubscribes[i] {
			subscribed[ref] = true
		}
		for _, ref := range p.External[i] {
			from, ok := scope[ref]
			if !ok {
				continue
			}
			kind := EdgeRequire
			if subscribed[ref] {
				kind = EdgeSubscribe
				delete(subscribed, ref) // a reference both required and subscribed is listed twice
			}
			g.Edges = append(g.Edges, Edge{From: from, To: id(i), Kind: kind})
		}
	}
	return g
}

// Colour sets each node's Status from a run's report (resources in
// declaration order, child runs nested under their apply resources).
// Resources are matched by position and reference; a report of another
// manifest leaves the nodes it does not match uncoloured.
func (g *Graph) Colour(rep *coordinator.Report) {
	if rep == nil {
		return
	}
	byRef := make(map[string]*coordinator.ResourceReport, len(rep.Resources))
	for i := range rep.Resources {
		byRef[rep.Resources[i].Ref] = &rep.Resources[i]
	}
	for i, n := range g.Nodes {
		var rr *coordinator.ResourceReport
		if i < len(rep.Resources) && rep.Resources[i].Ref == n.Ref {
			rr = &rep.Resources[i]
		} else {
			rr = byRef[n.Ref]
		}
		if rr == nil {
			continue
		}
		n.Status = rr.Status
		if n.Child != nil {
			n.Child.Colour(rr.Child)
		}
	}
}

// Walk calls fn for every node, children after their apply node.
func (g *Graph) Walk(fn func(*Node)) {
	for _, n := range g.Nodes {
		fn(n)
		if n.Child != nil {
			n.Child.Walk(fn)
		}
	}
}

package compile

import (
	"errors"
	"fmt"
	"strings"

	"github.com/manifold-run/manifold/schemas"
)

// ErrCycle is wrapped by the error of a dependency cycle: resources that
// wait for each other (require, subscribe, automatic edges, declaration
// order) would never run, and the run would never end.
var ErrCycle = errors.New("compile: dependency cycle")

// checkCycles returns an error per dependency cycle of p's graph: its
// edges are Requires (written and automatic), Subscribes and After. Each
// error is at the cycle's first declared resource and names the chain
// from it, "file#/a -> exec#b -> file#/a", each arrow read "waits for".
// A resource is reported in one cycle at most.
func checkCycles(p *Plan) schemas.Errors {
	n := len(p.Requires)
	deps := func(i int) []int {
		d := make([]int, 0, len(p.Requires[i])+len(p.Subscribes[i])+1)
		d = append(d, p.Requires[i]...)
		d = append(d, p.Subscribes[i]...)
		if p.After[i] >= 0 {
			d = append(d, p.After[i])
		}
		return d
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, n)
	reported := make([]bool, n)
	var errs schemas.Errors
	// An iterative depth-first search: a manifest may hold tens of
	// thousands of resources in one chain.
	type frame struct {
		node int
		deps []int
		next int
	}
	var stack []frame
	for root := range n {
		if color[root] != white {
			continue
		}
		color[root] = grey
		stack = append(stack[:0], frame{node: root, deps: deps(root)})
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next == len(f.deps) {
				color[f.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			j := f.deps[f.next]
			f.next++
			switch color[j] {
			case white:
				color[j] = grey
				stack = append(stack, frame{node: j, deps: deps(j)})
			case grey:
				// j is on the stack: the frames from j to the top are a cycle.
				k := len(stack) - 1
				for stack[k].node != j {
					k--
				}
				cycle := make([]int, 0, len(stack)-k)
				for _, fr := range stack[k:] {
					cycle = append(cycle, fr.node)
				}
				if e := cycleError(p.Manifest, cycle, reported); e != nil {
					errs = append(errs, e)
				}
			}
		}
	}
	return errs
}

// cycleError is the error of cycle (each resource waits for the next, the
// last for the first), rotated to start at its first declared resource;
// nil when one of its resources is in a cycle reported already.
func cycleError(m *schemas.Manifest, cycle []int, reported []bool) *schemas.Error {
	first := 0
	for k, i := range cycle {
		if reported[i] {
			return nil
		}
		if i < cycle[first] {
			first = k
		}
	}
	refs := make([]string, 0, len(cycle)+1)
	for k := range cycle {
		i := cycle[(first+k)%len(cycle)]
		reported[i] = true
		refs = append(refs, m.Resources[i].Ref())
	}
	refs = append(refs, refs[0])
	r := &m.Resources[cycle[first]]
	return &schemas.Error{
		Pos: r.Pos,
		Message: fmt.Sprintf("%v: %s (each waits for the next through require, subscribe, an automatic edge or declaration order; "+
			"the run would never end: remove one of these edges)", ErrCycle, strings.Join(refs, " -> ")),
		Err: ErrCycle,
	}
}

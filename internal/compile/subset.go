package compile

import (
	"fmt"
	"slices"
)

// Subset is the plan of a repair run: the resources named by refs
// ("type#name" or "type#alias") and every resource that must be refreshed
// when one of them changes (their subscribers, transitively), in the
// manifest's order. References to resources left out are dropped — those
// were converged when last checked — so requires and subscribes stay
// among the subset, and the run's cost is that of the resources repaired,
// never the manifest's. An unknown reference is an error.
func Subset(p *Plan, refs []string) (*Plan, error) {
	m := p.Manifest
	index := m.Index()
	in := make([]bool, len(m.Resources))
	var queue []int
	for _, ref := range refs {
		i, ok := index[ref]
		if !ok {
			return nil, fmt.Errorf("compile: subset: %s: no such resource in %s", ref, m.Path)
		}
		if !in[i] {
			in[i] = true
			queue = append(queue, i)
		}
	}
	// Subscribers of each resource, from the plan's edges.
	subscribers := make([][]int, len(m.Resources))
	for i, subs := range p.Subscribes {
		for _, j := range subs {
			subscribers[j] = append(subscribers[j], i)
		}
	}
	for len(queue) > 0 {
		j := queue[0]
		queue = queue[1:]
		for _, i := range subscribers[j] {
			if !in[i] {
				in[i] = true
				queue = append(queue, i)
			}
		}
	}
	sub := *m
	sub.Resources = nil
	keep := func(ref string) bool {
		j, ok := index[ref]
		return ok && in[j]
	}
	for i, r := range m.Resources {
		if !in[i] {
			continue
		}
		r.Require = slices.DeleteFunc(slices.Clone(r.Require), func(ref string) bool { return !keep(ref) })
		r.Subscribe = slices.DeleteFunc(slices.Clone(r.Subscribe), func(ref string) bool { return !keep(ref) })
		sub.Resources = append(sub.Resources, r)
	}
	sp := graph(&sub, p.Data)
	sp.PreMessage, sp.PostMessage = p.PreMessage, p.PostMessage
	return sp, nil
}

// SubsetRefs lists the references Subset keeps for refs, in manifest
// order (what a repair run will hold).
func SubsetRefs(p *Plan, refs []string) ([]string, error) {
	sp, err := Subset(p, refs)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(sp.Manifest.Resources))
	for i, r := range sp.Manifest.Resources {
		out[i] = r.Ref()
	}
	return out, nil
}

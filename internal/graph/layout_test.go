package graph

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/coordinator"
)

// TestLayoutSVG: the layered drawing is well-formed XML with one group
// per resource (id res_<ID>, class with its status), a node never
// overlapping another, and each edge's source left of its target when
// the target waits for it alone.
func TestLayoutSVG(t *testing.T) {
	t.Parallel()
	g := buildSite(t, site)
	g.Colour(&coordinator.Report{Resources: []coordinator.ResourceReport{{Ref: "file#/srv/app", Status: "failed"}}})
	var b bytes.Buffer
	if err := g.writeLayoutSVG(&b); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	dec.Strict = true
	groups := map[string]string{}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, b.String())
		}
		if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "g" {
			var id, class string
			for _, a := range el.Attr {
				switch a.Name.Local {
				case "id":
					id = a.Value
				case "class":
					class = a.Value
				}
			}
			if strings.HasPrefix(id, "res_") {
				groups[id] = class
			}
		}
	}
	var n int
	g.Walk(func(nd *Node) {
		n++
		if _, ok := groups["res_"+nd.ID]; !ok {
			t.Errorf("no group for %s (%s)", nd.ID, nd.Ref)
		}
	})
	if len(groups) != n {
		t.Errorf("%d node groups, want %d", len(groups), n)
	}
	if !strings.Contains(groups["res_r0"], "status-failed") {
		t.Errorf("res_r0 class %q", groups["res_r0"])
	}
	d := layout(g)
	ids := make([]string, 0, len(d.nodes))
	for id := range d.nodes {
		ids = append(ids, id)
	}
	for i, a := range ids {
		for _, bid := range ids[i+1:] {
			ra, rb := d.nodes[a], d.nodes[bid]
			if ra.x < rb.x+rb.w && rb.x < ra.x+ra.w && ra.y < rb.y+rb.h && rb.y < ra.y+ra.h {
				t.Errorf("nodes %s %v and %s %v overlap", a, ra, bid, rb)
			}
		}
	}
	for _, e := range g.Edges {
		if d.nodes[e.From].x >= d.nodes[e.To].x {
			t.Errorf("edge %s -> %s goes backwards: %v, %v", e.From, e.To, d.nodes[e.From], d.nodes[e.To])
		}
	}
}

// TestLayoutScales: a chain and a wide fan of 5,000 resources each lay
// out (the layout is linear in nodes and edges but for the sort of each
// column).
func TestLayoutScales(t *testing.T) {
	t.Parallel()
	g, err := FromPlan(plan(MaxSVGNodes), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.writeLayoutSVG(io.Discard); err != nil {
		t.Fatal(err)
	}
}

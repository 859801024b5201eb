package graph

import (
	"bufio"
	"encoding/xml"
	"io"
	"slices"
	"strconv"
	"strings"
)

// The SVG drawing is laid out here, in pure Go: a layered ("Sugiyama")
// layout from left to right, as DOT's rankdir=LR draws it. Each resource
// sits in the column after the last resource it waits for (longest path
// from the sources), resources of a column are ordered by the mean
// position of what they wait for (a few sweeps, which removes most
// crossings of a resource graph), and edges are cubic curves from the
// right side of a node to the left side of the next. An apply resource
// and its child manifest form one box in their column, laid out the same
// way inside (nested to MaxDepth).
//
// Why not go-graphviz (graphviz compiled to WebAssembly): its package
// compiles the WebAssembly module in an init function, so every start of
// the binary paid for it — measured here, `manifold version` went from
// 0.04 s to 0.14 s of CPU and from 32 MB to 49 MB of RSS, on every apply,
// run and worker start, for a picture few commands draw.

// Sizes of the drawing, in SVG user units (pixels at 100 %).
const (
	nodeH    = 38.0
	charW    = 6.4 // an 11px sans-serif character, roughly
	minNodeW = 80.0
	maxNodeW = 340.0
	colGap   = 64.0
	rowGap   = 16.0
	pad      = 12.0 // inside a cluster
	labelH   = 18.0 // a cluster's label line
	margin   = 16.0
	titleH   = 22.0
	arcLift  = 48.0 // an edge skipping columns peaks 36 above its row
	sweeps   = 4
)

// item is what one column of one level holds: a node, or an apply node
// with its child manifest's cluster.
type item struct {
	node  *Node
	sub   *level
	w, h  float64
	x, y  float64 // relative to the level's origin
	layer int
	pos   int // index in its layer
}

// level is the layout of one manifest.
type level struct {
	items []*item
	w, h  float64
}

type rect struct{ x, y, w, h float64 }

type cluster struct {
	rect
	label string
}

// drawing is the placed graph: every node's box (absolute), the clusters
// and every edge of every level.
type drawing struct {
	nodes    map[string]rect
	order    []*Node
	clusters []cluster
	edges    []Edge
	w, h     float64
}

func nodeWidth(n *Node) float64 {
	l := max(len([]rune(n.Type)), len([]rune(shortName(n.Name))))
	return min(max(minNodeW, float64(l)*charW+20), maxNodeW)
}

// shortName is the name drawn in a node; the full reference is its
// title (shown on hover).
func shortName(s string) string {
	const maxRunes = 50
	s = oneLine(s)
	r := []rune(s)
	if len(r) <= maxRunes {
		return s
	}
	return string(r[:maxRunes-1]) + "…"
}

// layoutLevel lays g out with its origin at 0,0.
func layoutLevel(g *Graph) *level {
	lv := &level{}
	index := make(map[string]int, len(g.Nodes))
	for i, n := range g.Nodes {
		it := &item{node: n, w: nodeWidth(n), h: nodeH}
		if n.Child != nil {
			it.sub = layoutLevel(n.Child)
			it.w = pad + it.w + colGap/2 + it.sub.w + pad
			it.h = labelH + pad + max(nodeH, it.sub.h) + pad
		}
		lv.items = append(lv.items, it)
		index[n.ID] = i
	}
	preds := make([][]int, len(lv.items))
	succs := make([][]int, len(lv.items))
	for _, e := range g.Edges {
		from, okf := index[e.From]
		to, okt := index[e.To]
		if !okf || !okt || from == to {
			continue // an ancestor's node: drawn, not layered here
		}
		preds[to] = append(preds[to], from)
		succs[from] = append(succs[from], to)
	}
	// Columns: longest path from the sources, in topological order
	// (cycles are refused by compile; a leftover is put last).
	indeg := make([]int, len(lv.items))
	for i := range preds {
		indeg[i] = len(preds[i])
	}
	queue := make([]int, 0, len(lv.items))
	for i, d := range indeg {
		if d == 0 {
			queue = append(queue, i)
		}
	}
	done := 0
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		done++
		for _, j := range succs[i] {
			lv.items[j].layer = max(lv.items[j].layer, lv.items[i].layer+1)
			if indeg[j]--; indeg[j] == 0 {
				queue = append(queue, j)
			}
		}
	}
	layers := 0
	for _, it := range lv.items {
		layers = max(layers, it.layer+1)
	}
	if done < len(lv.items) {
		for i, d := range indeg {
			if d > 0 {
				lv.items[i].layer = layers
			}
		}
		layers++
	}
	cols := make([][]*item, layers)
	for _, it := range lv.items {
		it.pos = len(cols[it.layer])
		cols[it.layer] = append(cols[it.layer], it)
	}
	// Order each column by the mean position of its predecessors.
	key := make(map[*item]float64, len(lv.items))
	for range sweeps {
		for _, col := range cols[1:] {
			for _, it := range col {
				k, n := 0.0, 0
				for _, j := range preds[index[it.node.ID]] {
					p := lv.items[j]
					k += float64(p.pos) / float64(max(1, len(cols[p.layer])-1))
					n++
				}
				if n == 0 {
					key[it] = float64(it.pos) / float64(max(1, len(col)-1))
				} else {
					key[it] = k / float64(n)
				}
			}
			slices.SortStableFunc(col, func(a, b *item) int {
				switch {
				case key[a] < key[b]:
					return -1
				case key[a] > key[b]:
					return 1
				}
				return 0
			})
			for p, it := range col {
				it.pos = p
			}
		}
	}
	// Coordinates: columns side by side, each centred on the tallest.
	colW := make([]float64, layers)
	colH := make([]float64, layers)
	for l, col := range cols {
		for i, it := range col {
			colW[l] = max(colW[l], it.w)
			colH[l] += it.h
			if i > 0 {
				colH[l] += rowGap
			}
		}
	}
	lv.h = slices.Max(append(colH, nodeH))
	x := 0.0
	for l, col := range cols {
		y := (lv.h - colH[l]) / 2
		for _, it := range col {
			it.x, it.y = x+(colW[l]-it.w)/2, y
			y += it.h + rowGap
		}
		x += colW[l]
		if l < layers-1 {
			x += colGap
		}
	}
	lv.w = x
	return lv
}

// place records the absolute boxes of lv's nodes and clusters, lv at
// ox, oy, and collects g's edges (g is the graph lv was laid out from).
func (d *drawing) place(g *Graph, lv *level, ox, oy float64) {
	d.edges = append(d.edges, g.Edges...)
	for _, it := range lv.items {
		x, y := ox+it.x, oy+it.y
		if it.sub == nil {
			d.nodes[it.node.ID] = rect{x, y, it.w, it.h}
			d.order = append(d.order, it.node)
			continue
		}
		d.clusters = append(d.clusters, cluster{rect{x, y, it.w, it.h}, it.node.Ref + " applies " + it.node.Child.Manifest})
		inner := it.h - labelH - 2*pad
		nw := nodeWidth(it.node)
		d.nodes[it.node.ID] = rect{x + pad, y + labelH + pad + (inner-nodeH)/2, nw, nodeH}
		d.order = append(d.order, it.node)
		d.place(it.node.Child, it.sub, x+pad+nw+colGap/2, y+labelH+pad+(inner-it.sub.h)/2)
	}
}

func layout(g *Graph) *drawing {
	lv := layoutLevel(g)
	d := &drawing{nodes: map[string]rect{}}
	d.place(g, lv, margin, margin+titleH+arcLift*0.75)
	d.w, d.h = lv.w+2*margin, lv.h+2*margin+titleH+arcLift*0.75
	d.w = max(d.w, float64(len([]rune(g.Manifest)))*charW*1.2+2*margin)
	return d
}

// writeLayoutSVG draws g as SVG. Each resource is a group whose id is
// "res_" and the node's ID and whose class holds "status-<status>" when
// coloured (a page finds and restyles it), with its reference (and
// status) as title, its type and name as text.
func (g *Graph) writeLayoutSVG(w io.Writer) error {
	d := layout(g)
	bw := bufio.NewWriter(w)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	bw.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	bw.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" width="` + f(d.w) + `" height="` + f(d.h) +
		`" viewBox="0 0 ` + f(d.w) + " " + f(d.h) + `">` + "\n")
	bw.WriteString(`<g id="graph0" class="graph" font-family="Helvetica,Arial,sans-serif" font-size="11">` + "\n")
	bw.WriteString(`<path d="M0,0 H` + f(d.w) + " V" + f(d.h) + ` H0 Z" fill="#ffffff"/>` + "\n") // readable on a dark page too
	bw.WriteString("<title>" + esc(g.Manifest) + "</title>\n")
	bw.WriteString(`<text x="` + f(margin) + `" y="` + f(margin+13) + `" font-size="13" font-weight="bold" fill="#111827">` +
		esc(oneLine(g.Manifest)) + "</text>\n")
	for _, c := range d.clusters {
		bw.WriteString(`<g class="cluster"><title>` + esc(c.label) + "</title>")
		bw.WriteString(`<path d="` + roundRect(c.rect, 8, f) + `" fill="none" stroke="#6b7280" stroke-dasharray="5,3"/>`)
		bw.WriteString(`<text x="` + f(c.x+pad) + `" y="` + f(c.y+14) + `" fill="#374151">` + esc(shortName(c.label)) + "</text></g>\n")
	}
	for _, e := range d.edges {
		from, okf := d.nodes[e.From]
		to, okt := d.nodes[e.To]
		if !okf || !okt {
			continue
		}
		s := edgeStyles[e.Kind]
		x1, y1 := from.x+from.w, from.y+from.h/2
		x2, y2 := to.x-7, to.y+to.h/2
		dx := max((x2-x1)/2, 30)
		c1x, c2x := x1+dx, x2-dx
		c1y, c2y := y1, y2
		if x2-x1 > 2*colGap+minNodeW && y1-y2 < nodeH && y2-y1 < nodeH {
			// It skips columns on its row: arc over the nodes between.
			c1y, c2y = min(y1, y2)-arcLift, min(y1, y2)-arcLift
		}
		bw.WriteString(`<g class="edge edge-` + string(e.Kind) + `"><title>` + esc(e.From+" -> "+e.To) + "</title>")
		bw.WriteString(`<path d="M` + f(x1) + "," + f(y1) + " C" + f(c1x) + "," + f(c1y) + " " + f(c2x) + "," + f(c2y) + " " +
			f(x2) + "," + f(y2) + `" fill="none" stroke="` + s.color + `"`)
		switch s.style {
		case "dashed":
			bw.WriteString(` stroke-dasharray="5,3"`)
		case "dotted":
			bw.WriteString(` stroke-dasharray="1,3"`)
		case "bold":
			bw.WriteString(` stroke-width="2"`)
		}
		bw.WriteString("/>")
		bw.WriteString(`<polygon points="` + f(to.x) + "," + f(y2) + " " + f(x2) + "," + f(y2-4) + " " + f(x2) + "," + f(y2+4) +
			`" fill="` + s.color + `" stroke="` + s.color + `"/>`)
		if s.label != "" {
			mx := (x1 + 3*c1x + 3*c2x + x2) / 8
			my := (y1+3*c1y+3*c2y+y2)/8 - 4
			bw.WriteString(`<text x="` + f(mx) + `" y="` + f(my) + `" text-anchor="middle" font-size="9" fill="` + s.color + `">` +
				esc(s.label) + "</text>")
		}
		bw.WriteString("</g>\n")
	}
	for _, n := range d.order {
		r := d.nodes[n.ID]
		st := StatusStyle(n.Status)
		title, class := n.Ref, "node resource"
		if n.Status != "" {
			title += ": " + n.Status
			class += " status-" + strings.ReplaceAll(n.Status, " ", "-")
		}
		bw.WriteString(`<g id="res_` + n.ID + `" class="` + class + `"><title>` + esc(title) + "</title><g><a>")
		bw.WriteString(`<path d="` + roundRect(r, 6, f) + `" fill="` + st.Fill + `" stroke="` + st.Border + `"/>`)
		cx := r.x + r.w/2
		bw.WriteString(`<text x="` + f(cx) + `" y="` + f(r.y+15) + `" text-anchor="middle" font-size="9" fill="#4b5563">` +
			esc(n.Type) + "</text>")
		bw.WriteString(`<text x="` + f(cx) + `" y="` + f(r.y+29) + `" text-anchor="middle" fill="#111827">` +
			esc(shortName(n.Name)) + "</text>")
		bw.WriteString("</a></g></g>\n")
	}
	bw.WriteString("</g>\n</svg>\n")
	return bw.Flush()
}

func roundRect(r rect, rad float64, f func(float64) string) string {
	rad = min(rad, r.w/2, r.h/2)
	var b strings.Builder
	b.WriteString("M" + f(r.x+rad) + "," + f(r.y))
	b.WriteString(" H" + f(r.x+r.w-rad) + " Q" + f(r.x+r.w) + "," + f(r.y) + " " + f(r.x+r.w) + "," + f(r.y+rad))
	b.WriteString(" V" + f(r.y+r.h-rad) + " Q" + f(r.x+r.w) + "," + f(r.y+r.h) + " " + f(r.x+r.w-rad) + "," + f(r.y+r.h))
	b.WriteString(" H" + f(r.x+rad) + " Q" + f(r.x) + "," + f(r.y+r.h) + " " + f(r.x) + "," + f(r.y+r.h-rad))
	b.WriteString(" V" + f(r.y+rad) + " Q" + f(r.x) + "," + f(r.y) + " " + f(r.x+rad) + "," + f(r.y) + " Z")
	return b.String()
}

// esc escapes s as XML character data (invalid characters become U+FFFD).
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

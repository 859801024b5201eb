package graph

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// WriteDOT writes the graph in Graphviz's DOT language: one node per
// resource (labelled type, then name; filled by status when coloured),
// require edges solid, subscribe edges bold blue labelled "subscribe",
// automatic edges dashed grey labelled "auto", declaration order dotted
// light grey, and each apply resource with its child manifest in a
// cluster labelled with the child's path. Every name is quoted and
// escaped: resource names are user input.
func (g *Graph) WriteDOT(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "// %s: resource graph by manifold (solid: require, bold blue: subscribe,\n", oneLine(g.Manifest))
	fmt.Fprintf(bw, "// dashed: automatic edge, dotted: declaration order; clusters: apply children)\n")
	fmt.Fprintf(bw, "digraph manifold {\n")
	fmt.Fprintf(bw, "\tgraph [rankdir=LR, fontname=\"Helvetica\", fontsize=11, label=%s, labelloc=t];\n", quote(g.Manifest))
	fmt.Fprintf(bw, "\tnode [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n")
	fmt.Fprintf(bw, "\tedge [fontname=\"Helvetica\", fontsize=9];\n")
	var edges []Edge
	g.writeNodes(bw, "\t", &edges)
	for _, e := range edges {
		s := edgeStyles[e.Kind]
		fmt.Fprintf(bw, "\t%s -> %s [class=%q, style=%s, color=%q", e.From, e.To, "edge-"+string(e.Kind), s.style, s.color)
		if s.label != "" {
			fmt.Fprintf(bw, ", label=%q, fontcolor=%q", s.label, s.color)
		}
		bw.WriteString("];\n")
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

// writeNodes declares g's nodes (an apply node with a child inside its
// cluster) and collects the edges, which are written after all nodes so
// that each node is declared in its own cluster first.
func (g *Graph) writeNodes(w *bufio.Writer, indent string, edges *[]Edge) {
	for _, n := range g.Nodes {
		if n.Child == nil {
			writeNode(w, indent, n)
			continue
		}
		fmt.Fprintf(w, "%ssubgraph cluster_%s {\n", indent, n.ID)
		fmt.Fprintf(w, "%s\tgraph [label=%s, style=\"rounded,dashed\", color=\"#6b7280\"];\n", indent, quote(n.Ref+" applies "+n.Child.Manifest))
		writeNode(w, indent+"\t", n)
		n.Child.writeNodes(w, indent+"\t", edges)
		fmt.Fprintf(w, "%s}\n", indent)
	}
	*edges = append(*edges, g.Edges...)
}

func writeNode(w *bufio.Writer, indent string, n *Node) {
	s := StatusStyle(n.Status)
	tooltip := n.Ref
	class := "resource"
	if n.Status != "" {
		tooltip += ": " + n.Status
		class += " status-" + strings.ReplaceAll(n.Status, " ", "-")
	}
	fmt.Fprintf(w, "%s%s [id=%s, class=%q, label=%s, tooltip=%s, fillcolor=%q, color=%q];\n",
		indent, n.ID, quote("res_"+n.ID), class, quote(n.Type+"\n"+n.Name), quote(tooltip), s.Fill, s.Border)
}

// quote makes s a DOT quoted string: backslashes and quotes escaped (so
// that \N, \G and friends in names are not expanded), & as &amp; (so
// that &lt; in a name stays &lt;), newlines as \n.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '&':
			b.WriteString("&amp;") // graphviz reads &name; in labels as an entity
		case '\n':
			b.WriteString(`\n`)
		case '\r':
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}

package graph

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// WriteMermaid writes the graph as a Mermaid flowchart (GitHub and
// GitLab render it in Markdown): require edges `-->`, subscribe `==>`
// labelled "subscribe", automatic edges dotted labelled "auto",
// declaration order dotted and grey, apply children as subgraphs, status
// colours as classes. Labels are written with Mermaid entity codes for
// every character outside letters, digits and a few safe marks, so a
// resource name cannot break the diagram.
func (g *Graph) WriteMermaid(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("flowchart LR\n")
	var edges []Edge
	used := map[string]bool{}
	g.writeMermaidNodes(bw, "  ", &edges, used)
	var grey []int
	for i, e := range edges {
		switch e.Kind {
		case EdgeSubscribe:
			fmt.Fprintf(bw, "  %s ==>|subscribe| %s\n", e.From, e.To)
		case EdgeAuto:
			fmt.Fprintf(bw, "  %s -.->|auto| %s\n", e.From, e.To)
		case EdgeOrder:
			fmt.Fprintf(bw, "  %s -.-> %s\n", e.From, e.To)
			grey = append(grey, i)
		default:
			fmt.Fprintf(bw, "  %s --> %s\n", e.From, e.To)
		}
	}
	for _, i := range grey {
		fmt.Fprintf(bw, "  linkStyle %d stroke:#9ca3af\n", i)
	}
	for _, st := range append(Statuses(), "no answer") {
		if !used[st] {
			continue
		}
		s := StatusStyle(st)
		fmt.Fprintf(bw, "  classDef %s fill:%s,stroke:%s\n", mermaidClass(st), s.Fill, s.Border)
	}
	return bw.Flush()
}

func (g *Graph) writeMermaidNodes(w *bufio.Writer, indent string, edges *[]Edge, used map[string]bool) {
	for _, n := range g.Nodes {
		if n.Child != nil {
			fmt.Fprintf(w, "%ssubgraph %s_c[\"%s\"]\n", indent, n.ID, mermaidText(n.Ref+" applies "+n.Child.Manifest))
			writeMermaidNode(w, indent+"  ", n, used)
			n.Child.writeMermaidNodes(w, indent+"  ", edges, used)
			fmt.Fprintf(w, "%send\n", indent)
			continue
		}
		writeMermaidNode(w, indent, n, used)
	}
	*edges = append(*edges, g.Edges...)
}

func writeMermaidNode(w *bufio.Writer, indent string, n *Node, used map[string]bool) {
	fmt.Fprintf(w, "%s%s[\"%s<br/>%s\"]", indent, n.ID, mermaidText(n.Type), mermaidText(n.Name))
	if _, ok := styles[n.Status]; ok {
		fmt.Fprintf(w, ":::%s", mermaidClass(n.Status))
		used[n.Status] = true
	}
	w.WriteByte('\n')
}

func mermaidClass(status string) string {
	return "st_" + strings.ReplaceAll(status, " ", "_")
}

// mermaidText escapes s for a quoted Mermaid label: anything but
// letters, digits, space and / . _ - : becomes an entity code (#35;).
func mermaidText(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9',
			r == ' ', r == '/', r == '.', r == '_', r == '-', r == ':':
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, "#%d;", r)
		}
	}
	return b.String()
}

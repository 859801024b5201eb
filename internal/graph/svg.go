package graph

import (
	"context"
	"fmt"
	"io"
)

// MaxSVGNodes bounds the nodes of a graph WriteSVG draws: 5,000. Past
// that a picture is unreadable (and some 1.5 MB of SVG); DOT or Mermaid
// is the way.
const MaxSVGNodes = 5000

// Count returns how many nodes the graph has, children included.
func (g *Graph) Count() int {
	n := 0
	g.Walk(func(*Node) { n++ })
	return n
}

func (g *Graph) checkSVG() error {
	if n := g.Count(); n > MaxSVGNodes {
		return fmt.Errorf("%w: %d resources, an SVG is drawn for at most %d (use --format dot)", ErrTooLarge, n, MaxSVGNodes)
	}
	return nil
}

// WriteSVG lays the graph out (layout.go: a layered drawing, in-process,
// pure Go) and writes SVG. Each resource is an SVG group whose id is
// "res_" and the node's ID and whose class holds "status-<status>" when
// coloured, so that a page can find and restyle it.
//
// A graph of more than MaxSVGNodes nodes is refused with ErrTooLarge
// before any layout (use WriteDOT and a graphviz install's sfdp).
func (g *Graph) WriteSVG(ctx context.Context, w io.Writer) error {
	if err := g.checkSVG(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return g.writeLayoutSVG(w)
}

package graph

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/goccy/go-graphviz"
)

// renderMu serialises renders: go-graphviz parses DOT in one WebAssembly
// module shared by the process.
var renderMu sync.Mutex

// WriteSVG lays the graph out with Graphviz's dot (compiled to
// WebAssembly and run in-process: no graphviz install) and writes SVG.
// Each resource is an SVG group whose id is "res-" and the node's ID and
// whose class holds "status-<status>" when coloured, so that a page can
// find and restyle it.
func (g *Graph) WriteSVG(ctx context.Context, w io.Writer) error {
	var dot bytes.Buffer
	if err := g.WriteDOT(&dot); err != nil {
		return err
	}
	return DOTToSVG(ctx, dot.Bytes(), w)
}

// DOTToSVG renders DOT text as SVG with go-graphviz.
func DOTToSVG(ctx context.Context, dot []byte, w io.Writer) error {
	renderMu.Lock()
	defer renderMu.Unlock()
	gv, err := graphviz.New(ctx)
	if err != nil {
		return fmt.Errorf("graph: start graphviz: %w", err)
	}
	defer gv.Close()
	parsed, err := graphviz.ParseBytes(dot)
	if err != nil {
		return fmt.Errorf("graph: parse DOT: %w", err)
	}
	defer parsed.Close()
	if err := gv.Render(ctx, parsed, graphviz.SVG, w); err != nil {
		return fmt.Errorf("graph: render SVG: %w", err)
	}
	return nil
}

package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/graph"
)

const graphAbout = `Prints the resource graph of a manifest: one node per resource, and the
edges that order them:
  require       solid black arrow
  subscribe     bold blue arrow labelled "subscribe"
  automatic     dashed grey arrow labelled "auto" (a file after its parent
                directory, a service after its package...; see render)
  declaration   dotted light grey arrow (ordering: manifest)
Arrows point from the resource that runs first to the one that waits. An
apply resource and its child manifest are drawn in a cluster (a subgraph in
Mermaid). The manifest is compiled as validate compiles it (data, --hiera,
--fact, this host's facts).

--format dot (the default) prints Graphviz DOT; mermaid a Mermaid flowchart
(Markdown on GitHub and GitLab renders it); svg a picture laid out
in-process, in pure Go (no graphviz install); at most 5000 resources.

--run RUN colours the nodes by the run's outcomes (changed amber, stable
green, failed red, skipped grey, dispatched blue, pending white), reading
the run's report from the bus (connection flags as for status). Without
MANIFEST the graph is the run's own plan, children included, as its
coordinator compiled it.
Exit 0 on success, 2 for an invalid manifest, bad flags or an unknown run,
3 when the bus cannot be read.`

func runGraph(ctx context.Context, st IO, args []string) int {
	var (
		cf    compileFlags
		conn  connFlags
		runID string
	)
	format := choice{"dot", []string{"dot", "mermaid", "svg"}}
	fs := newFlags("graph", "[--format dot|mermaid|svg] [--run RUN] MANIFEST", graphAbout, st, args)
	fs.Var(&format, "format", "output format: dot, mermaid or svg")
	fs.StringVar(&runID, "run", "", "colour the nodes by this run's outcomes (read from the bus; MANIFEST is then optional)")
	cf.register(fs, "data override used to compile the manifest: key=value, repeatable")
	conn.register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) > 1 || len(pos) == 0 && runID == "" {
		fmt.Fprintln(st.Stderr, "manifold graph: want one MANIFEST argument (or --run RUN)")
		fs.Usage()
		return ExitInvalid
	}
	if runID != "" {
		if err := bus.ValidToken(runID); err != nil {
			fmt.Fprintf(st.Stderr, "manifold graph: --run: run ID %v\n", err)
			return ExitInvalid
		}
	}
	var g *graph.Graph
	if len(pos) == 1 {
		data, facts, ok := cf.inputs(ctx, st, "graph", true)
		if !ok {
			return ExitInvalid
		}
		t, ok := compileTree(st, "graph", pos[0], data, facts)
		if !ok {
			return ExitInvalid
		}
		if g, err = graph.FromTree(t); err != nil {
			fmt.Fprintf(st.Stderr, "manifold graph: %s: %v\n", pos[0], err)
			return ExitInvalid
		}
	}
	if runID != "" {
		var code int
		if g, code = runGraphOf(ctx, st, &conn, runID, g); g == nil {
			return code
		}
	}
	var out bytes.Buffer
	switch format.value {
	case "mermaid":
		err = g.WriteMermaid(&out)
	case "svg":
		err = g.WriteSVG(ctx, &out)
	default:
		err = g.WriteDOT(&out)
	}
	if errors.Is(err, graph.ErrTooLarge) {
		fmt.Fprintf(st.Stderr, "manifold graph: %v\n", err)
		return ExitInvalid
	} else if err != nil {
		fmt.Fprintf(st.Stderr, "manifold graph: %v\n", err)
		return ExitUnavailable
	}
	_, _ = st.Stdout.Write(out.Bytes())
	return ExitOK
}

// runGraphOf colours g by the run's report, or (g nil) builds the run's
// own graph. A nil graph comes with the exit code.
func runGraphOf(ctx context.Context, st IO, conn *connFlags, runID string, g *graph.Graph) (*graph.Graph, int) {
	ctx, cancel := context.WithTimeout(ctx, remoteTimeout)
	defer cancel()
	b, err := conn.attach(ctx, st, "manifold-graph")
	if err != nil {
		return nil, connExit(st, "graph", err)
	}
	defer b.Conn().Close()
	rep, err := coordinator.GetReport(ctx, b, runID)
	if errors.Is(err, bus.ErrNotFound) {
		fmt.Fprintf(st.Stderr, "manifold graph: no run %s\n", runID)
		return nil, ExitInvalid
	} else if err != nil {
		fmt.Fprintf(st.Stderr, "manifold graph: %v\n", err)
		return nil, ExitUnavailable
	}
	if g != nil {
		g.Colour(rep)
		return g, ExitOK
	}
	g, err = graph.FromRun(ctx, b, &graph.Plans{}, rep)
	if errors.Is(err, graph.ErrTooLarge) {
		fmt.Fprintf(st.Stderr, "manifold graph: run %s: %v\n", runID, err)
		return nil, ExitInvalid
	} else if err != nil {
		fmt.Fprintf(st.Stderr, "manifold graph: run %s: %v (pass the MANIFEST to draw it coloured by the run)\n", runID, err)
		return nil, ExitUnavailable
	}
	return g, ExitOK
}

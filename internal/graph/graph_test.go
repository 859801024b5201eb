package graph

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/coordinator"
	"github.com/manifold-run/manifold/internal/compile"
	"github.com/manifold-run/manifold/schemas"
)

// site is a manifest with every edge kind: an automatic edge (a file in a
// managed directory, no require), a written require, a subscribe,
// declaration order, an apply child whose resource requires a parent's
// resource, and a name that needs escaping.
var site = map[string]string{
	"manifest.yaml": `
resources:
  - file:
      - /srv/app: {ensure: directory}
      - /srv/app/conf: {content: "x\n"}
      - '/srv/<b>we"ird\N&lt;</b>': {content: "y\n", require: ["file#/srv/app"]}
  - exec:
      - reload: {command: /bin/true, refreshonly: true, subscribe: ["file#/srv/app/conf"]}
      - plain: {command: /bin/true}
  - apply:
      - child.yaml: {}
`,
	"child.yaml": `
resources:
  - exec:
      - child-one: {command: /bin/true, require: ["exec#plain"]}
      - child-two: {command: /bin/true}
`,
}

func buildSite(t *testing.T, files map[string]string) *Graph {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := compile.Build(filepath.Join(dir, "manifest.yaml"), compile.Opts{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := FromTree(tree)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l) {
			t.Errorf("output lacks %q:\n%s", l, out)
		}
	}
}

func TestDOTEdgeKinds(t *testing.T) {
	t.Parallel()
	g := buildSite(t, site)
	var b strings.Builder
	if err := g.WriteDOT(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	wantLines(t, out,
		"digraph manifold {",
		`r0 [id="res_r0", class="resource", label="file\n/srv/app"`,
		// The name's quote, backslash and ampersand escaped: \N is not DOT's
		// node-name escape, &lt; is not an entity.
		`label="file\n/srv/<b>we\"ird\\N&amp;lt;</b>"`,
		`r0 -> r1 [class="edge-auto", style=dashed, color="#6b7280", label="auto"`,
		`r0 -> r2 [class="edge-require", style=solid`,
		`r1 -> r3 [class="edge-subscribe", style=bold, color="#1d4ed8", label="subscribe"`,
		`r3 -> r4 [class="edge-order", style=dotted`,
		"subgraph cluster_r5 {",
		`graph [label="apply#child.yaml applies `,
		"\t\tr5 [id=\"res_r5\"",
		"\t\tr5_0 [id=\"res_r5_0\"",
		// The child's require of a parent's resource crosses the cluster.
		`r4 -> r5_0 [class="edge-require"`,
		`r5_0 -> r5_1 [class="edge-order"`,
	)
	// Declaration order is not drawn where a require, subscribe or
	// automatic edge joins the two already.
	if l := `r0 -> r1 [class="edge-order"`; strings.Contains(out, l) {
		t.Errorf("output has %q where an automatic edge joins the two:\n%s", l, out)
	}
	wantLines(t, out, `r1 -> r2 [class="edge-order"`, `r2 -> r3 [class="edge-order"`, `r4 -> r5 [class="edge-order"`)
	if n := strings.Count(out, " -> "); n != 9 {
		t.Errorf("%d edges, want 9:\n%s", n, out)
	}
}

func TestMermaidEdgeKinds(t *testing.T) {
	t.Parallel()
	g := buildSite(t, site)
	var b strings.Builder
	if err := g.WriteMermaid(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	wantLines(t, out,
		"flowchart LR\n",
		`  r0["file<br/>/srv/app"]`,
		// <, >, " and \ as entity codes: nothing breaks out of the label.
		`r2["file<br/>/srv/#60;b#62;we#34;ird#92;N#38;lt#59;#60;/b#62;"]`,
		"  r0 -.->|auto| r1\n",
		"  r0 --> r2\n",
		"  r1 ==>|subscribe| r3\n",
		"  r3 -.-> r4\n",
		`  subgraph r5_c["apply#35;child.yaml applies `,
		"    r5[\"apply<br/>child.yaml\"]\n",
		"    r5_0[\"exec<br/>child-one\"]\n",
		"  end\n",
		"  r4 --> r5_0\n",
		"  r5_0 -.-> r5_1\n",
	)
	if strings.Contains(out, `we"ird`) || strings.Contains(out, "<b>") {
		t.Errorf("a raw name reached the diagram:\n%s", out)
	}
}

func TestColourByReport(t *testing.T) {
	t.Parallel()
	g := buildSite(t, site)
	rep := &coordinator.Report{RunID: "r1", Resources: []coordinator.ResourceReport{
		{Ref: "file#/srv/app", Status: "changed"},
		{Ref: "file#/srv/app/conf", Status: "stable"},
		{Ref: `file#/srv/<b>we"ird\N&lt;</b>`, Status: "failed"},
		{Ref: "exec#reload", Status: "skipped"},
		{Ref: "exec#plain", Status: "dispatched"},
		{Ref: "apply#child.yaml", Status: "changed", Child: &coordinator.Report{Resources: []coordinator.ResourceReport{
			{Ref: "exec#child-two", Status: "no answer"}, // out of order: matched by reference
			{Ref: "exec#child-one", Status: "stable"},
		}}},
	}}
	g.Colour(rep)
	var dot, mm strings.Builder
	if err := g.WriteDOT(&dot); err != nil {
		t.Fatal(err)
	}
	if err := g.WriteMermaid(&mm); err != nil {
		t.Fatal(err)
	}
	wantLines(t, dot.String(),
		`r0 [id="res_r0", class="resource status-changed", label="file\n/srv/app", tooltip="file#/srv/app: changed", fillcolor="#fde68a"`,
		`r2 [id="res_r2", class="resource status-failed"`,
		`class="resource status-skipped"`,
		`r5_1 [id="res_r5_1", class="resource status-no-answer"`,
		`r5_0 [id="res_r5_0", class="resource status-stable"`,
	)
	wantLines(t, mm.String(),
		`r0["file<br/>/srv/app"]:::st_changed`,
		`r5_1["exec<br/>child-two"]:::st_no_answer`,
		"classDef st_failed fill:#fca5a5,stroke:#b91c1c\n",
		"classDef st_no_answer fill:#fca5a5",
	)
	if strings.Contains(mm.String(), "classDef st_cancelled") {
		t.Errorf("a class no node uses is defined:\n%s", mm.String())
	}
}

// TestSVG: the SVG go-graphviz renders in-process is well-formed XML with
// one group per resource, found by the id the DOT gave it, and the
// escaped name as text.
func TestSVG(t *testing.T) {
	t.Parallel()
	g := buildSite(t, site)
	g.Colour(&coordinator.Report{Resources: []coordinator.ResourceReport{{Ref: "file#/srv/app", Status: "failed"}}})
	var b bytes.Buffer
	if err := g.WriteSVG(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	ids, texts := map[string]string{}, ""
	dec := xml.NewDecoder(&b)
	dec.Strict = true
	var root string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
			var id, class string
			for _, a := range tok.Attr {
				switch a.Name.Local {
				case "id":
					id = a.Value
				case "class":
					class = a.Value
				}
			}
			if tok.Name.Local == "g" && strings.HasPrefix(id, "res_") {
				ids[id] = class
			}
		case xml.CharData:
			texts += string(tok) + "\n"
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	for _, id := range []string{"res_r0", "res_r1", "res_r2", "res_r3", "res_r4", "res_r5", "res_r5_0", "res_r5_1"} {
		if _, ok := ids[id]; !ok {
			t.Errorf("no <g id=%q> in the SVG; groups: %v", id, ids)
		}
	}
	if !strings.Contains(ids["res_r0"], "status-failed") {
		t.Errorf("res_r0 class %q lacks status-failed", ids["res_r0"])
	}
	for _, s := range []string{"/srv/app", `/srv/<b>we"ird\N&lt;</b>`, "child-one", "subscribe", "auto"} {
		if !strings.Contains(texts, s) {
			t.Errorf("SVG text lacks %q", s)
		}
	}
}

// TestApplyItself: a manifest that applies itself is drawn once, its
// apply node without a nested copy.
func TestApplyItself(t *testing.T) {
	t.Parallel()
	g := buildSite(t, map[string]string{"manifest.yaml": "resources:\n  - exec:\n      - a: {command: /bin/true}\n  - apply:\n      - manifest.yaml: {}\n"})
	if len(g.Nodes) != 2 || g.Nodes[1].Child != nil {
		t.Fatalf("nodes %+v, want exec#a and apply#manifest.yaml without a child", g.Nodes)
	}
}

// plan returns a plan of n resources in declaration order.
func plan(n int) *compile.Plan {
	m := &schemas.Manifest{Path: "big.yaml"}
	p := &compile.Plan{Manifest: m, Requires: make([][]int, n), Subscribes: make([][]int, n), After: make([]int, n)}
	for i := range n {
		m.Resources = append(m.Resources, schemas.Resource{Type: "exec", Name: "e" + string(rune('a'+i%26))})
		p.After[i] = i - 1
	}
	return p
}

func TestMaxNodes(t *testing.T) {
	t.Parallel()
	g, err := FromPlan(plan(MaxNodes), nil)
	if err != nil {
		t.Fatalf("%d resources: %v", MaxNodes, err)
	}
	if len(g.Nodes) != MaxNodes || len(g.Edges) != MaxNodes-1 {
		t.Fatalf("%d nodes, %d edges", len(g.Nodes), len(g.Edges))
	}
	if _, err := FromPlan(plan(MaxNodes+1), nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%d resources: err %v, want ErrTooLarge", MaxNodes+1, err)
	}
}

// TestMaxSVGNodes: an SVG is laid out for MaxSVGNodes nodes and refused
// past them before any layout (the check is what is timed here: laying
// out 5,000 nodes takes seconds of CPU).
func TestMaxSVGNodes(t *testing.T) {
	t.Parallel()
	at, err := FromPlan(plan(MaxSVGNodes), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := at.checkSVG(); err != nil {
		t.Fatalf("%d nodes: %v", MaxSVGNodes, err)
	}
	past, err := FromPlan(plan(MaxSVGNodes+1), nil)
	if err != nil {
		t.Fatal(err)
	}
	err = past.WriteSVG(context.Background(), io.Discard)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "5001 resources") {
		t.Fatalf("%d nodes: err %v, want ErrTooLarge naming the count", MaxSVGNodes+1, err)
	}
}

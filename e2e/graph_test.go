package e2e

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// graphSite has every edge kind: automatic (a file in a managed
// directory), require, subscribe, declaration order, and an apply child.
func graphSite(t *testing.T) (dir, manifest string) {
	t.Helper()
	dir = t.TempDir()
	writeFile(t, dir, "child.yaml", "resources:\n  - exec:\n      - inner: {command: /bin/true}\n")
	manifest = writeFile(t, dir, "site.yaml", `resources:
  - file:
      - `+dir+`/out: {ensure: directory}
      - `+dir+`/out/app.conf: {content: "x\n"}
  - exec:
      - reload: {command: /bin/true, refreshonly: true, subscribe: ["file#`+dir+`/out/app.conf"]}
      - broken: {command: "/bin/sh -c 'exit 3'", require: ["file#`+dir+`/out"]}
  - apply:
      - child.yaml: {}
`)
	return dir, manifest
}

// TestGraphCommand: manifold graph prints DOT by default, Mermaid and an
// SVG rendered in-process on request, and refuses bad input with exit 2.
func TestGraphCommand(t *testing.T) {
	t.Parallel()
	_, m := graphSite(t)

	r := run(t, "graph", m)
	wantCode(t, r, 0)
	for _, want := range []string{
		"digraph manifold {",
		`r0 -> r1 [class="edge-auto", style=dashed`,
		`r1 -> r2 [class="edge-subscribe", style=bold`,
		`r0 -> r3 [class="edge-require", style=solid`,
		`r2 -> r3 [class="edge-order", style=dotted`,
		"subgraph cluster_r4 {",
		`r4_0 [id="res_r4_0", class="resource", label="exec\ninner"`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("graph lacks %q:\n%s", want, r.stdout)
		}
	}

	r = run(t, "graph", "--format", "mermaid", m)
	wantCode(t, r, 0)
	for _, want := range []string{"flowchart LR\n", "  r0 -.->|auto| r1\n", "  r1 ==>|subscribe| r2\n", "  r0 --> r3\n", "  subgraph r4_c[", "    r4_0[\"exec<br/>inner\"]\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("mermaid lacks %q:\n%s", want, r.stdout)
		}
	}

	r = run(t, "graph", "--format", "svg", m)
	wantCode(t, r, 0)
	ids := svgNodeIDs(t, r.stdout)
	for _, id := range []string{"res_r0", "res_r1", "res_r2", "res_r3", "res_r4", "res_r4_0"} {
		if !ids[id] {
			t.Errorf("SVG has no node %s; has %v", id, ids)
		}
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"graph", "--format", "png", m}, "want one of dot, mermaid, svg"},
		{[]string{"graph"}, "want one MANIFEST argument (or --run RUN)"},
		{[]string{"graph", m, m}, "want one MANIFEST argument"},
		{[]string{"graph", "--run", "a.b", m}, "--run: run ID"},
	} {
		r := run(t, c.args...)
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: stderr lacks %q:\n%s", c.args, c.want, r)
		}
	}
	// Past graph.MaxSVGNodes an SVG is refused before any layout; DOT is
	// still printed.
	var big strings.Builder
	big.WriteString("resources:\n  - exec:\n")
	for i := range 5001 {
		fmt.Fprintf(&big, "      - e%d: {command: /bin/true}\n", i)
	}
	bigM := writeFile(t, t.TempDir(), "big.yaml", big.String())
	r = run(t, "graph", "--format", "svg", bigM)
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "5001 resources, an SVG is drawn for at most 5000 (use --format dot)") || r.stdout != "" {
		t.Errorf("an SVG past the limit:\n%s", r)
	}
	r = run(t, "graph", bigM)
	wantCode(t, r, 0)
	if n := strings.Count(r.stdout, "edge-order"); n != 5000 {
		t.Errorf("DOT of 5001 resources has %d order edges, want 5000", n)
	}
	bad := writeFile(t, t.TempDir(), "bad.yaml", "resources:\n  - exec:\n      - x: {command: /bin/true, require: [\"exec#nosuch\"]}\n")
	r = run(t, "graph", bad)
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "bad.yaml:3:") || !strings.Contains(r.stderr, "exec#nosuch") {
		t.Errorf("an invalid manifest's error does not name file:line and the reference:\n%s", r)
	}
}

// svgNodeIDs parses an SVG as XML (failing the test when it is not) and
// returns the ids of its node groups.
func svgNodeIDs(t *testing.T, svg string) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	dec := xml.NewDecoder(strings.NewReader(svg))
	dec.Strict = true
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("SVG is not XML: %v\n%s", err, svg)
		}
		if el, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = el.Name.Local
			}
			for _, a := range el.Attr {
				if a.Name.Local == "id" && strings.HasPrefix(a.Value, "res_") {
					ids[a.Value] = true
				}
			}
		}
	}
	if root != "svg" {
		t.Fatalf("SVG root element %q", root)
	}
	return ids
}

// TestGraphRun: graph --run colours the nodes by a run's outcomes read
// from the bus, children included: the run's own plan without MANIFEST,
// the manifest's with it.
func TestGraphRun(t *testing.T) {
	t.Parallel()
	c := distStart(t, "w1")
	_, m := graphSite(t)
	r := c.run(t, "run", m)
	wantCode(t, r, 0)
	id := strings.TrimSpace(r.stdout)
	if rep := c.waitFinal(t, id, 30*time.Second); rep.Status != "failed" {
		t.Fatalf("run %s: %s, want failed", id, rep.Status)
	}
	for _, args := range [][]string{{"graph", "--run", id}, {"graph", "--run", id, m}} {
		r := c.run(t, args...)
		wantCode(t, r, 0)
		for _, want := range []string{
			`r0 [id="res_r0", class="resource status-changed"`,
			`r2 [id="res_r2", class="resource status-changed"`, // refreshed by its subscription
			`r3 [id="res_r3", class="resource status-failed"`,
			`fillcolor="#fca5a5"`,
			`r4_0 [id="res_r4_0", class="resource status-changed"`, // the child run's
			`r1 -> r2 [class="edge-subscribe"`,
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%v lacks %q:\n%s", args, want, r.stdout)
			}
		}
	}
	r = c.run(t, "graph", "--run", "nosuch")
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "no run nosuch") {
		t.Errorf("unknown run:\n%s", r)
	}
	r = c.run(t, "graph", "--run", id, "--format", "svg")
	wantCode(t, r, 0)
	if ids := svgNodeIDs(t, r.stdout); !ids["res_r4_0"] {
		t.Errorf("the run's SVG lacks the child's node: %v", ids)
	}
}

package ui

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/fnv"
	"html/template"
	"io"
	"regexp"
	"strings"
	"sync"

	"github.com/manifold-run/manifold/internal/graph"
)

// maxCachedSVGs bounds the laid-out graphs kept: 64.
const maxCachedSVGs = 64

// svgCache keeps the layout of run graphs. A layout does not depend on
// statuses: it is made once per run and shape (child runs add clusters
// as they start), and each page view only sets the status classes of its
// nodes, which the stylesheet colours. So a live run's page costs no
// layout per poll.
type svgCache struct {
	mu   sync.Mutex
	svgs map[string][]byte
}

// get returns g's SVG, sanitised, with each node's class set to its
// status.
func (c *svgCache) get(ctx context.Context, runID string, g *graph.Graph) (template.HTML, error) {
	status := map[string]string{}
	h := fnv.New64a()
	g.Walk(func(n *graph.Node) {
		status[n.ID] = n.Status
		n.Status = ""
		fmt.Fprintf(h, "%s %s\n", n.ID, n.Ref)
	})
	key := fmt.Sprintf("%s/%x", runID, h.Sum64())
	c.mu.Lock()
	svg, ok := c.svgs[key]
	c.mu.Unlock()
	if !ok {
		var b bytes.Buffer
		if err := g.WriteSVG(ctx, &b); err != nil {
			return "", err
		}
		var err error
		if svg, err = sanitise(b.Bytes()); err != nil {
			return "", err
		}
		c.mu.Lock()
		if c.svgs == nil || len(c.svgs) >= maxCachedSVGs {
			c.svgs = map[string][]byte{}
		}
		c.svgs[key] = svg
		c.mu.Unlock()
	}
	out := nodeGroup.ReplaceAllFunc(svg, func(m []byte) []byte {
		id := string(nodeGroup.FindSubmatch(m)[1])
		cls := "node resource"
		if st := status[id]; st != "" {
			cls += " status-" + strings.ReplaceAll(st, " ", "-")
		}
		return fmt.Appendf(nil, `<g id="res_%s" class="%s">`, id, cls)
	})
	return template.HTML(out), nil // sanitised: see sanitise
}

// nodeGroup is a node's group as graph.WriteSVG writes it (the IDs are the
// graph's own: letters, digits, underscores).
var nodeGroup = regexp.MustCompile(`<g id="res_([A-Za-z0-9_]+)" class="[^"]*">`)

// svgElements and svgAttrs are what graph.WriteSVG's SVG holds and what the
// page accepts of it; anything else (a script, an event handler, a link)
// refuses the picture.
var (
	svgElements = map[string]bool{"svg": true, "g": true, "title": true, "path": true, "polygon": true,
		"polyline": true, "ellipse": true, "text": true, "a": true}
	svgAttrs = map[string]bool{"width": true, "height": true, "viewBox": true, "xmlns": true, "xlink": true,
		"id": true, "class": true, "transform": true, "fill": true, "stroke": true, "points": true, "d": true,
		"cx": true, "cy": true, "rx": true, "ry": true, "x": true, "y": true, "text-anchor": true,
		"font-family": true, "font-size": true, "font-weight": true, "font-style": true, "stroke-width": true,
		"stroke-dasharray": true, "title": true, "fill-opacity": true, "stroke-opacity": true}
)

// errUnsafeSVG: the SVG holds something the allow-list does not.
var errUnsafeSVG = errors.New("ui: graph SVG holds an element or attribute the page does not embed")

// sanitise returns the <svg> element of graph.WriteSVG's output (no XML
// prolog, doctype or comments before it) after checking that it is
// well-formed and holds only allow-listed elements and attributes. Text
// is escaped by the writer; the check is a second line against a bug
// there.
func sanitise(svg []byte) ([]byte, error) {
	start := bytes.Index(svg, []byte("<svg"))
	if start < 0 {
		return nil, fmt.Errorf("%w: no <svg> element", errUnsafeSVG)
	}
	svg = svg[start:]
	dec := xml.NewDecoder(bytes.NewReader(svg))
	dec.Strict = true
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return svg, nil
		} else if err != nil {
			return nil, fmt.Errorf("%w: %v", errUnsafeSVG, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if !svgElements[tok.Name.Local] {
				return nil, fmt.Errorf("%w: <%s>", errUnsafeSVG, tok.Name.Local)
			}
			for _, a := range tok.Attr {
				if !svgAttrs[a.Name.Local] {
					return nil, fmt.Errorf("%w: <%s %s=...>", errUnsafeSVG, tok.Name.Local, a.Name.Local)
				}
			}
		case xml.ProcInst, xml.Directive:
			return nil, fmt.Errorf("%w: a processing instruction or directive inside <svg>", errUnsafeSVG)
		}
	}
}

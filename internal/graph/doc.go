// Package graph draws a compiled manifest's resource graph: its resources
// as nodes, the edges that order them (declaration order, require,
// subscribe, automatic edges) and the child manifests of apply resources
// as nested clusters, optionally coloured by a run's outcomes. It writes
// DOT, Mermaid and SVG (rendered in-process by go-graphviz, graphviz
// compiled to WebAssembly: no graphviz install, no cgo).
package graph

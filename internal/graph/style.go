package graph

// Style is how a drawing shows one status: a fill and a border colour.
type Style struct {
	Fill, Border string
}

// styles are the colours of node statuses, shared by DOT, SVG, Mermaid
// and the web view's legend.
var styles = map[string]Style{
	"changed":    {"#fde68a", "#b45309"},
	"stable":     {"#bbf7d0", "#15803d"},
	"failed":     {"#fca5a5", "#b91c1c"},
	"no answer":  {"#fca5a5", "#b91c1c"},
	"skipped":    {"#e5e7eb", "#6b7280"},
	"cancelled":  {"#d1d5db", "#4b5563"},
	"pending":    {"#ffffff", "#9ca3af"},
	"dispatched": {"#bfdbfe", "#1d4ed8"},
}

// plain is an uncoloured node.
var plain = Style{"#ffffff", "#374151"}

// StatusStyle returns the colours a node of the status is drawn with;
// an unknown or empty status is drawn plain.
func StatusStyle(status string) Style {
	if s, ok := styles[status]; ok {
		return s
	}
	return plain
}

// Statuses lists the statuses with a colour of their own, for legends.
func Statuses() []string {
	return []string{"changed", "stable", "failed", "skipped", "cancelled", "dispatched", "pending"}
}

// edgeStyle is how an edge kind is drawn in DOT: style, colour, label.
type edgeStyle struct {
	style, color, label string
}

var edgeStyles = map[EdgeKind]edgeStyle{
	EdgeRequire:   {"solid", "#111827", ""},
	EdgeSubscribe: {"bold", "#1d4ed8", "subscribe"},
	EdgeAuto:      {"dashed", "#6b7280", "auto"},
	EdgeOrder:     {"dotted", "#9ca3af", ""},
}

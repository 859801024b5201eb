package document

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/manifold-run/manifold/resources/merge"
)

// tree is a parsed document: the node tree (kept to preserve comments, key
// order and styles when writing back) and its value for merging. An empty
// document has a nil root and value.
type tree struct {
	format Format
	doc    *yaml.Node // the DocumentNode (YAML) or nil (JSON)
	root   *yaml.Node // the top value's node
	value  any
	indent string // one level of indentation seen in the input
}

// parse reads data in format. Syntax errors are *ParseError with the line.
func parse(format Format, data []byte) (*tree, error) {
	t := &tree{format: format, indent: detectIndent(data)}
	if len(bytes.TrimSpace(data)) == 0 {
		return t, nil
	}
	if format == FormatJSON {
		return t, t.parseJSON(data)
	}
	return t, t.parseYAML(data)
}

func (t *tree) parseJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return jsonError(data, err, dec.InputOffset())
	}
	if _, err := dec.Token(); err != io.EOF {
		return &ParseError{Line: lineAt(data, dec.InputOffset()), Err: errors.New("data after the top-level value")}
	}
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	root, err := jsonNode(dec)
	if err != nil {
		return jsonError(data, err, dec.InputOffset())
	}
	t.root, t.value = root, normalize(v)
	return nil
}

func jsonError(data []byte, err error, offset int64) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		offset = syn.Offset
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		offset = int64(len(data))
	}
	return &ParseError{Line: lineAt(data, offset), Err: err}
}

// jsonNode builds the node tree of the next JSON value, keeping key order.
func jsonNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		if t == '[' {
			n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
		}
		for dec.More() {
			if n.Kind == yaml.MappingNode {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, stringNode(k.(string)))
			}
			v, err := jsonNode(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return stringNode(t), nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(t.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}, nil
	default:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
}

func stringNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): `) })

func (t *tree) parseYAML(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil
		}
		return yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return yamlError(err)
		}
		return &ParseError{Line: extra.Line, Err: errors.New("more than one YAML document")}
	}
	if len(doc.Content) == 0 {
		return nil
	}
	var v any
	if err := doc.Decode(&v); err != nil {
		return yamlError(err)
	}
	t.doc, t.root, t.value = &doc, doc.Content[0], normalize(v)
	return nil
}

func yamlError(err error) error {
	line := 0
	if m := yamlLine().FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
	}
	msg := yamlLine().ReplaceAllString(err.Error(), "")
	return &ParseError{Line: line, Err: errors.New(strings.TrimPrefix(msg, "yaml: "))}
}

func lineAt(data []byte, offset int64) int {
	offset = min(max(offset, 0), int64(len(data)))
	return 1 + bytes.Count(data[:offset], []byte("\n"))
}

// detectIndent returns the first indentation unit of data (two spaces when
// nothing is indented).
func detectIndent(data []byte) string {
	for _, line := range bytes.Split(data, []byte("\n")) {
		trimmed := bytes.TrimLeft(line, " \t")
		if len(trimmed) == len(line) || len(trimmed) == 0 {
			continue
		}
		ws := string(line[:len(line)-len(trimmed)])
		if ws[0] == '\t' {
			return "\t"
		}
		if n := len(ws) - len(strings.TrimLeft(ws, " ")); n <= 8 {
			return ws[:n]
		}
	}
	return "  "
}

// normalize turns decoded values into the shapes merge expects: maps with
// string keys, int64 for integers, float64 for other numbers.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = normalize(x)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[fmt.Sprint(k)] = normalize(x)
		}
		return m
	case []any:
		for i, x := range t {
			t[i] = normalize(x)
		}
		return t
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	case int:
		return int64(t)
	case uint64:
		if t <= math.MaxInt64 {
			return int64(t)
		}
		return float64(t)
	default:
		return v
	}
}

// render returns the bytes of merged, patched into the parsed tree so that
// unchanged nodes keep their comments, order and style.
func (t *tree) render(merged any) ([]byte, error) {
	root := t.root
	if root != nil && !patchable(root) {
		root = nil // anchors, aliases or merge keys: rebuild (see patchable)
	}
	root, err := patch(root, merged)
	if err != nil {
		return nil, err
	}
	if t.format == FormatJSON {
		var buf bytes.Buffer
		if err := writeJSON(&buf, root, t.indent, ""); err != nil {
			return nil, err
		}
		buf.WriteByte('\n')
		return buf.Bytes(), nil
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode}
	if t.doc != nil {
		d := *t.doc
		doc = &d
	}
	doc.Content = []*yaml.Node{root}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	indent := len(t.indent)
	if t.indent == "\t" || indent < 2 {
		indent = 2
	}
	enc.SetIndent(indent)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// patchable reports whether n can be patched node by node: an anchor that
// an alias refers to, or a merge key ("<<"), ties nodes together, and
// replacing one of them would break the other.
func patchable(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode || n.Anchor != "" || n.Tag == "!!merge" {
		return false
	}
	for _, c := range n.Content {
		if !patchable(c) {
			return false
		}
	}
	return true
}

// nodeValue decodes one node.
func nodeValue(n *yaml.Node) (any, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	return normalize(v), nil
}

// patch returns a node holding want, reusing n (and, inside it, every node
// whose value is unchanged) so comments and styles survive.
func patch(n *yaml.Node, want any) (*yaml.Node, error) {
	if n != nil {
		have, err := nodeValue(n)
		if err != nil {
			return nil, err
		}
		if merge.Equal(have, want) {
			return n, nil
		}
	}
	switch w := want.(type) {
	case map[string]any:
		if n != nil && n.Kind == yaml.MappingNode {
			return patchMap(n, w)
		}
	case []any:
		if n != nil && n.Kind == yaml.SequenceNode {
			return patchList(n, w)
		}
	}
	out, err := build(want)
	if err != nil {
		return nil, err
	}
	if n != nil {
		out.HeadComment, out.LineComment, out.FootComment = n.HeadComment, n.LineComment, n.FootComment
		if n.Kind == out.Kind && (n.Kind != yaml.ScalarNode || n.Tag == out.Tag) {
			out.Style = n.Style
		}
	}
	return out, nil
}

func patchMap(n *yaml.Node, w map[string]any) (*yaml.Node, error) {
	out := *n
	out.Content = nil
	seen := make(map[string]bool, len(w))
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		wv, ok := w[k.Value]
		if !ok || seen[k.Value] {
			continue
		}
		seen[k.Value] = true
		pv, err := patch(v, wv)
		if err != nil {
			return nil, err
		}
		out.Content = append(out.Content, k, pv)
	}
	for _, k := range sortedKeys(w) {
		if seen[k] {
			continue
		}
		v, err := build(w[k])
		if err != nil {
			return nil, err
		}
		out.Content = append(out.Content, stringNode(k), v)
	}
	return &out, nil
}

// patchList reuses the items of n: first those whose value is unchanged,
// then, in order, nodes of the same kind that come after the previous
// reused one (an item whose fields changed).
func patchList(n *yaml.Node, w []any) (*yaml.Node, error) {
	values := make([]any, len(n.Content))
	for i, c := range n.Content {
		v, err := nodeValue(c)
		if err != nil {
			return nil, err
		}
		values[i] = v
	}
	used := make([]bool, len(n.Content))
	match := make([]int, len(w))
	for i, wi := range w {
		match[i] = -1
		for j := range n.Content {
			if !used[j] && merge.Equal(values[j], wi) {
				match[i], used[j] = j, true
				break
			}
		}
	}
	prev := -1
	for i, wi := range w {
		if match[i] >= 0 {
			prev = max(prev, match[i])
			continue
		}
		for j := prev + 1; j < len(n.Content); j++ {
			if !used[j] && sameKind(n.Content[j], wi) {
				match[i], used[j], prev = j, true, j
				break
			}
		}
	}
	out := *n
	out.Content = make([]*yaml.Node, len(w))
	for i, wi := range w {
		var err error
		if match[i] >= 0 {
			out.Content[i], err = patch(n.Content[match[i]], wi)
		} else {
			out.Content[i], err = build(wi)
		}
		if err != nil {
			return nil, err
		}
	}
	return &out, nil
}

func sameKind(n *yaml.Node, v any) bool {
	switch v.(type) {
	case map[string]any:
		return n.Kind == yaml.MappingNode
	case []any:
		return n.Kind == yaml.SequenceNode
	}
	return false
}

// build makes a fresh node for v.
func build(v any) (*yaml.Node, error) {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	return &n, nil
}

// writeJSON writes the node tree as indented JSON, keeping key order and
// the literal spelling of numbers.
func writeJSON(buf *bytes.Buffer, n *yaml.Node, unit, indent string) error {
	switch n.Kind {
	case yaml.MappingNode, yaml.SequenceNode:
		open, close := "{", "}"
		if n.Kind == yaml.SequenceNode {
			open, close = "[", "]"
		}
		if len(n.Content) == 0 {
			buf.WriteString(open + close)
			return nil
		}
		buf.WriteString(open)
		step := 1
		if n.Kind == yaml.MappingNode {
			step = 2
		}
		inner := indent + unit
		for i := 0; i < len(n.Content); i += step {
			if i > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString("\n" + inner)
			if step == 2 {
				writeString(buf, n.Content[i].Value)
				buf.WriteString(": ")
			}
			if err := writeJSON(buf, n.Content[i+step-1], unit, inner); err != nil {
				return err
			}
		}
		buf.WriteString("\n" + indent + close)
		return nil
	case yaml.AliasNode:
		return writeJSON(buf, n.Alias, unit, indent)
	case yaml.DocumentNode:
		return writeJSON(buf, n.Content[0], unit, indent)
	}
	v, err := nodeValue(n)
	if err != nil {
		return err
	}
	switch x := v.(type) {
	case string:
		writeString(buf, x)
		return nil
	case int64, float64:
		if json.Valid([]byte(n.Value)) && n.Value != "" && n.Value[0] != '+' {
			buf.WriteString(n.Value)
			return nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("value %q: %w", n.Value, err)
	}
	buf.Write(b)
	return nil
}

func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	buf.Truncate(buf.Len() - 1)
}

// decodeContent parses the desired document of the content property: a
// JSON map or list, or a string holding JSON or YAML.
func decodeContent(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if s, ok := v.(string); ok {
		t, err := parse(FormatYAML, []byte(s))
		if err != nil {
			return nil, err
		}
		v = t.value
	}
	v = normalize(v)
	switch v.(type) {
	case map[string]any, []any:
		return v, nil
	case nil:
		return nil, errors.New("is empty")
	default:
		return nil, fmt.Errorf("must be a map or a list, not %T", v)
	}
}

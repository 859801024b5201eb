package schemas

import (
	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
)

// CUE evaluates a list literal in time quadratic in its length (each new
// element is looked up among those before it): a manifest of 20,000
// resources spent most of its parse there. The entries of the resources
// list, and the items of each block-shape entry, are therefore taken out of
// the document's syntax before it is built and built one by one: the
// document keeps empty lists where they were, and the loader walks the
// entries built apart. Positions are the syntax's, so errors read the same.

// detachLists turns the building apart on (tests compare both ways).
var detachLists = true

// detachMin is the number of resources list entries and block items from
// which they are built apart: building each apart costs about 2.5 µs more
// than building it in its list, which the quadratic list costs only beyond
// some 2,500 (BenchmarkParseFilesOneShape).
var detachMin = 2500

// entry is one entry of the resources list, built apart.
type entry struct {
	value cue.Value
	// items are the entries of a block-shape entry's list, built apart
	// (its value then holds an empty list); nil when the entry has no list
	// literal under its one key.
	items []cue.Value
}

// detachResources takes the entries of the resources list (top level, else
// ccm.resources, as manifest reads them) out of decls, the document's
// top-level declarations, and builds them one by one. It returns nil when
// there is no such list literal.
func (p *loader) detachResources(decls []ast.Decl) []entry {
	var list *ast.ListLit
	if v := fieldValue(decls, "resources"); v != nil {
		list, _ = v.(*ast.ListLit)
	} else if ccm, ok := fieldValue(decls, "ccm").(*ast.StructLit); ok {
		list = listField(ccm.Elts, "resources")
	}
	if list == nil || countElts(list) < detachMin {
		return nil
	}
	entries := make([]entry, 0, len(list.Elts))
	for _, e := range list.Elts {
		var inner []ast.Expr
		if s, ok := e.(*ast.StructLit); ok && len(s.Elts) == 1 {
			if f, ok := s.Elts[0].(*ast.Field); ok {
				if l, ok := f.Value.(*ast.ListLit); ok {
					inner, l.Elts = l.Elts, nil
				}
			}
		}
		en := entry{value: p.s.ctx.BuildExpr(e)}
		if inner != nil {
			en.items = make([]cue.Value, len(inner))
			for i, item := range inner {
				en.items[i] = p.s.ctx.BuildExpr(item)
			}
		}
		entries = append(entries, en)
	}
	list.Elts = nil
	if entries == nil {
		entries = []entry{}
	}
	return entries
}

// countElts counts the entries of a resources list and the items of its
// block-shape entries.
func countElts(list *ast.ListLit) int {
	n := len(list.Elts)
	for _, e := range list.Elts {
		if s, ok := e.(*ast.StructLit); ok && len(s.Elts) == 1 {
			if f, ok := s.Elts[0].(*ast.Field); ok {
				if l, ok := f.Value.(*ast.ListLit); ok {
					n += len(l.Elts)
				}
			}
		}
	}
	return n
}

// fieldValue returns the value of the regular field named label among
// decls, nil if none.
func fieldValue(decls []ast.Decl, label string) ast.Expr {
	for _, d := range decls {
		f, ok := d.(*ast.Field)
		if !ok {
			continue
		}
		if name, _, err := ast.LabelName(f.Label); err == nil && name == label {
			return f.Value
		}
	}
	return nil
}

// listField returns the list literal of the field named label among
// decls, nil if it is not one.
func listField(decls []ast.Decl, label string) *ast.ListLit {
	l, _ := fieldValue(decls, label).(*ast.ListLit)
	return l
}

// countEntries counts the resources of entries built apart, as
// countResources does for a list.
func countEntries(entries []entry) int {
	n := 0
	for _, e := range entries {
		if e.items == nil {
			n += countEntry(e.value)
			continue
		}
		for _, item := range e.items {
			if !item.LookupPath(cue.MakePath(cue.Str(defaultsName))).Exists() {
				n++
			}
		}
	}
	return n
}

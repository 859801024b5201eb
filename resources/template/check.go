package template

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/expr-lang/expr/ast"
)

// Check reports whether s is a well-formed template without evaluating
// it: its markers pair up and every expression compiles (its syntax is
// valid and it calls only known functions and variables). It needs no
// data, facts or files, so manifests are checked before anything runs
// even where evaluation must wait for a worker's facts. The error is a
// *SyntaxError or an *ExprError.
func Check(s string) error {
	if !HasTemplate(s) {
		return nil
	}
	var buf [maxStackParts]part
	parts, err := parseInto(buf[:0], s)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if !p.expr {
			continue
		}
		if _, ok := checked.Load(p.text); ok {
			continue
		}
		program, err := compile(p.text)
		if err != nil {
			return &ExprError{Expr: p.text, Err: err}
		}
		if err := checkInline(program.Node()); err != nil {
			return &ExprError{Expr: p.text, Err: err}
		}
		if checkedCount.Load() < maxCached {
			if _, loaded := checked.LoadOrStore(p.text, struct{}{}); !loaded {
				checkedCount.Add(1)
			}
		}
	}
	return nil
}

// checked holds the expressions Check found valid (at most maxCached):
// a manifest repeats the same expression in every resource.
var (
	checked      sync.Map // expression text → struct{}
	checkedCount atomic.Int64
)

// checkInline checks the template text given literally to jet() and
// template() in an expression (jet('[[ Data.x ]]'), template('{{ 1 }}')),
// so a syntax error there fails before anything runs, as one in the
// expression does. Paths (x.jet, x.templ) are files: CheckFile reads them.
func checkInline(node ast.Node) error {
	var v inlineVisitor
	ast.Walk(&node, &v)
	return v.err
}

type inlineVisitor struct{ err error }

func (v *inlineVisitor) Visit(node *ast.Node) {
	call, ok := (*node).(*ast.CallNode)
	if !ok || v.err != nil || len(call.Arguments) == 0 {
		return
	}
	callee, ok := call.Callee.(*ast.IdentifierNode)
	if !ok {
		return
	}
	literal := func(i int) (string, bool) {
		if i >= len(call.Arguments) {
			return "", false
		}
		s, ok := call.Arguments[i].(*ast.StringNode)
		if !ok {
			return "", false
		}
		return s.Value, true
	}
	text, ok := literal(0)
	if !ok {
		return
	}
	switch callee.Value {
	case "jet":
		if strings.HasSuffix(text, ".jet") {
			return
		}
		left, right := "[[", "]]"
		if len(call.Arguments) == 3 {
			l, lok := literal(1)
			r, rok := literal(2)
			if !lok || !rok || l == "" || r == "" {
				return // checked when it runs
			}
			left, right = l, r
		}
		_, v.err = parseJet("inline", text, left, right, nil)
	case "template":
		if ext := filepath.Ext(text); ext == ".jet" || ext == ".templ" {
			return
		}
		v.err = Check(text)
	}
}

// CheckFile checks the syntax of a template file without evaluating it:
// a .jet file as Jet ([[ ]]), anything else as {{ }} / ${ } text. The
// templates it names literally are checked in turn (read through read,
// nested at most MaxDepth); a file read returns os.ErrNotExist for is left
// to the run, which may never read it.
func CheckFile(name string, read func(name string) ([]byte, error)) error {
	return checkFile(name, read, 0)
}

func checkFile(name string, read func(string) ([]byte, error), depth int) error {
	if depth > MaxDepth {
		return nil // the run reports the nesting
	}
	b, err := read(name)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	text := string(b)
	if filepath.Ext(name) == ".jet" {
		if _, err := parseJet(name, text, "[[", "]]", nil); err != nil {
			return err
		}
	} else if err := Check(text); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, ref := range FileRefs(text) {
		if err := checkFile(ref, read, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// CheckValue runs Check on every string inside v, walking maps and lists
// as RenderValue does. The error names the path of the first bad string
// (a *PathError when the path is not empty); map keys are visited in
// sorted order, so the same value always gives the same error.
func CheckValue(v any) error {
	return checkValue(v, "")
}

// CheckKeys runs Check on the keys of the maps inside v, at every depth,
// for values whose keys are rendered too (goss_rules). The error names the
// key's path.
func CheckKeys(v any) error {
	return checkKeys(v, "")
}

func checkKeys(v any, path string) error {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if err := Check(k); err != nil {
				return atPath(join(path, k), err)
			}
			if err := checkKeys(v[k], join(path, k)); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := checkKeys(e, join(path, strconv.Itoa(i))); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkValue(v any, path string) error {
	switch v := v.(type) {
	case string:
		if err := Check(v); err != nil {
			return atPath(path, err)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if err := checkValue(v[k], join(path, k)); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := checkValue(e, join(path, strconv.Itoa(i))); err != nil {
				return err
			}
		}
	case map[string]string:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if err := checkValue(v[k], join(path, k)); err != nil {
				return err
			}
		}
	case []string:
		for i, e := range v {
			if err := checkValue(e, join(path, strconv.Itoa(i))); err != nil {
				return err
			}
		}
	}
	return nil
}

package template

import (
	"fmt"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm/runtime"
)

// exprAdd is the name "+" is compiled to; no expression can spell it.
const exprAdd = "@add"

// addPatch makes every "+" of an expression a call of exprAdd: expr-lang
// counts the memory of lists and maps it builds, not of the strings "+"
// concatenates, and `reduce(1..40, #acc + #acc, 'x')` doubled a string
// until the heap was exhausted.
type addPatch struct{}

func (addPatch) Visit(node *ast.Node) {
	b, ok := (*node).(*ast.BinaryNode)
	if !ok || b.Operator != "+" {
		return
	}
	call := &ast.CallNode{Callee: &ast.IdentifierNode{Value: exprAdd}, Arguments: []ast.Node{b.Left, b.Right}}
	ast.Patch(node, call)
}

// boundedAdd is "+": expr-lang's, with strings bounded by MaxOutput.
var boundedAdd = expr.Function(exprAdd, func(params ...any) (out any, err error) {
	if a, ok := params[0].(string); ok {
		if b, ok := params[1].(string); ok {
			if len(a)+len(b) > MaxOutput {
				return nil, fmt.Errorf("%w: a string over %d bytes", ErrLimit, MaxOutput)
			}
			return a + b, nil
		}
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return runtime.Add(params[0], params[1]), nil
})

// checkNesting refuses an expression whose brackets nest deeper than
// MaxExprNesting (quoted strings skipped): expr-lang's parser recurses on
// each, and deep enough nesting exhausts the stack.
func checkNesting(e string) error {
	depth := 0
	for i := 0; i < len(e); i++ {
		switch e[i] {
		case '\'', '"', '`':
			j := skipQuoted(e, i)
			if j < 0 {
				return nil // the parser reports it
			}
			i = j
		case '(', '[', '{':
			depth++
			if depth > MaxExprNesting {
				return fmt.Errorf("%w: brackets nested more than %d deep", ErrLimit, MaxExprNesting)
			}
		case ')', ']', '}':
			depth--
		}
	}
	return nil
}

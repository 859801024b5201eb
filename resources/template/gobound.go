package template

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	texttemplate "text/template"
	goparse "text/template/parse"
)

// MaxGoSteps bounds the steps of one Go template evaluation: each
// iteration of a range and each body of an if or with run is one step.
// `{{ range 1000000000 }}{{ end }}` writes nothing, so the output bound
// never stops it: 10,000,000 steps or the deadline do, whichever comes
// first.
const MaxGoSteps = 10_000_000

// maxGoSteps is MaxGoSteps; tests lower it.
var maxGoSteps = MaxGoSteps

// Go's text/template has a bound of its own on the nesting of {{ template
// }} calls (100,000), but reaching it took some 600 MB of stack, and it
// has no bound on time or output. So, like Jet's, a parsed Go template
// is instrumented before it runs: the body of every template (the root
// and each define or block) starts with a call counting one level more
// and ends with one counting one less, and the body of every range, if
// and with (and their else) starts with a call counting a step and
// looking at the clock. The functions are added after the template was
// parsed, under names the template's own functions do not use: a template
// that spells one fails to parse ("function not defined"), so none can
// call or shadow them.
const (
	goEnter = "manifoldBoundEnter"
	goLeave = "manifoldBoundLeave"
	goTick  = "manifoldBoundTick"
)

// ExecuteGo runs the parsed Go template tpl (and the templates it
// defines) into w with dot, bounded: {{ template }} calls nested at most
// MaxNesting deep, at most MaxGoSteps loop iterations and if/with bodies,
// at most max bytes written, and done by deadline (zero: RenderTimeout
// from now). Errors of a bound wrap ErrLimit and name the template and
// line. tpl is modified: run it again only through ExecuteGo.
func ExecuteGo(tpl *texttemplate.Template, w io.Writer, dot any, max int, deadline time.Time) error {
	b := newBudget(deadline)
	for _, t := range tpl.Templates() {
		if t.Tree != nil && t.Tree.Root != nil {
			instrumentGo(t.Tree.Root)
		}
	}
	steps := 0
	tpl.Funcs(texttemplate.FuncMap{
		goEnter: func() (string, error) { return "", b.enter("Go templates ({{ template }} calls)") },
		goLeave: func() string { b.leave(); return "" },
		goTick: func() (string, error) {
			if steps++; steps > maxGoSteps {
				return "", fmt.Errorf("%w: more than %d loop iterations and if/with bodies (a loop that does not end?)", ErrLimit, maxGoSteps)
			}
			return "", b.tick()
		},
	})
	err := tpl.Execute(&limitWriter{w: w, b: b, name: tpl.Name(), max: max}, dot)
	if err != nil && errors.Is(err, ErrLimit) {
		// "template: a.conf:2:9: executing "a.conf": evaluation limit
		// exceeded: ...", without the hidden call.
		msg := err.Error()
		for _, name := range []string{goEnter, goTick} {
			msg = strings.Replace(msg, " at <"+name+">: error calling "+name, "", 1)
		}
		return &reworded{msg: msg, err: err}
	}
	return err
}

// reworded is err with another message.
type reworded struct {
	msg string
	err error
}

func (e *reworded) Error() string { return e.msg }
func (e *reworded) Unwrap() error { return e.err }

// goCall returns an action calling the hidden function name, at the
// position of at (so an error names at's line).
func goCall(name string, pos goparse.Pos, line int) *goparse.ActionNode {
	id := goparse.NewIdentifier(name).SetPos(pos)
	cmd := &goparse.CommandNode{NodeType: goparse.NodeCommand, Pos: pos, Args: []goparse.Node{id}}
	pipe := &goparse.PipeNode{NodeType: goparse.NodePipe, Pos: pos, Line: line, Cmds: []*goparse.CommandNode{cmd}}
	return &goparse.ActionNode{NodeType: goparse.NodeAction, Pos: pos, Line: line, Pipe: pipe}
}

// calls reports whether n is an action calling the hidden function name.
func calls(n goparse.Node, name string) bool {
	a, ok := n.(*goparse.ActionNode)
	if !ok || a.Pipe == nil || len(a.Pipe.Cmds) != 1 || len(a.Pipe.Cmds[0].Args) != 1 {
		return false
	}
	id, ok := a.Pipe.Cmds[0].Args[0].(*goparse.IdentifierNode)
	return ok && id.Ident == name
}

// instrumentGo makes root, a template's body, count one level of nesting,
// and instruments the lists inside it; a root instrumented before is left
// as it is.
func instrumentGo(root *goparse.ListNode) {
	if len(root.Nodes) > 0 && calls(root.Nodes[0], goEnter) {
		return
	}
	walkGo(root.Nodes)
	nodes := make([]goparse.Node, 0, len(root.Nodes)+2)
	nodes = append(nodes, goCall(goEnter, root.Pos, 1))
	nodes = append(nodes, root.Nodes...)
	root.Nodes = append(nodes, goCall(goLeave, root.Pos, 1))
}

// walkGo puts a step at the start of the body of every range, if and
// with inside nodes (and of their else).
func walkGo(nodes []goparse.Node) {
	for _, n := range nodes {
		var branch *goparse.BranchNode
		switch n := n.(type) {
		case *goparse.RangeNode:
			branch = &n.BranchNode
		case *goparse.IfNode:
			branch = &n.BranchNode
		case *goparse.WithNode:
			branch = &n.BranchNode
		case *goparse.ListNode:
			walkGo(n.Nodes)
			continue
		default:
			continue
		}
		for _, l := range []*goparse.ListNode{branch.List, branch.ElseList} {
			if l == nil {
				continue
			}
			walkGo(l.Nodes)
			l.Nodes = append([]goparse.Node{goCall(goTick, branch.Pos, branch.Line)}, l.Nodes...)
		}
	}
}

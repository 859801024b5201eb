package template

import (
	"cmp"
	"fmt"
	"io"
	"reflect"
	"sync"
	"time"

	"github.com/CloudyKit/jet/v6"
)

// Jet has no bound on the nesting of blocks: `[[ block r() ]][[ yield r()
// ]][[ end ]]` recurses until the Go stack overflows, a fatal error that
// kills the process. So every parsed Jet template is instrumented: the
// body of each block and the root of each template start with a call
// counting one level more and end with one counting one less, and the body
// of each range starts with a call looking at the clock. The functions
// have names no template can spell ("@enter"), so a template can neither
// call nor shadow them; they are passed as variables of each execution,
// bound to its budget. A limit error raised inside a try block is still
// the evaluation's error: it cannot be caught.
const (
	jetEnter = "@enter"
	jetLeave = "@leave"
	jetTick  = "@tick"
	// jetMark is the first node of an instrumented list, so a template
	// is instrumented once however often it is stored.
	jetMark = "@instrumented"
)

// jetCall returns an action node calling the hidden function name, at the
// position of at; the enter and tick calls get at's "template:line" as
// their argument, for the error of a bound.
func jetCall(name string, at jet.NodeBase) *jet.ActionNode {
	base := at
	ident := &jet.IdentifierNode{NodeBase: base, Ident: name}
	ident.NodeType = jet.NodeIdentifier
	args := []jet.Expression{}
	if name == jetEnter || name == jetTick {
		text := at.TemplatePath
		if at.Line > 0 {
			text = fmt.Sprintf("%s:%d", text, at.Line)
		}
		where := &jet.StringNode{NodeBase: base, Text: text}
		where.NodeType = jet.NodeString
		args = append(args, where)
	}
	cmd := &jet.CommandNode{NodeBase: base, CallExprNode: jet.CallExprNode{NodeBase: base, BaseExpr: ident, CallArgs: jet.CallArgs{Exprs: args}}}
	cmd.NodeType = jet.NodeCommand
	cmd.CallExprNode.NodeType = jet.NodeCallExpr
	pipe := &jet.PipeNode{NodeBase: base, Cmds: []*jet.CommandNode{cmd}}
	pipe.NodeType = jet.NodePipe
	action := &jet.ActionNode{NodeBase: base, Pipe: pipe}
	action.NodeType = jet.NodeAction
	return action
}

// isMark reports whether n is the instrumentation mark.
func isMark(n jet.Node) bool {
	a, ok := n.(*jet.ActionNode)
	if !ok || a.Pipe == nil || len(a.Pipe.Cmds) != 1 {
		return false
	}
	id, ok := a.Pipe.Cmds[0].BaseExpr.(*jet.IdentifierNode)
	return ok && id.Ident == jetMark
}

// instrumentJet instruments t (see above); a template instrumented before
// is left as it is.
func instrumentJet(t *jet.Template) {
	if t == nil || t.Root == nil {
		return
	}
	wrapBody(t.Root, t.Root.NodeBase)
}

// wrapBody makes list count one level of nesting, then instruments what
// it holds.
func wrapBody(list *jet.ListNode, at jet.NodeBase) {
	if list == nil || len(list.Nodes) > 0 && isMark(list.Nodes[0]) {
		return
	}
	inner := list.Nodes
	walkJet(inner)
	nodes := make([]jet.Node, 0, len(inner)+3)
	nodes = append(nodes, jetCall(jetMark, at), jetCall(jetEnter, at))
	nodes = append(nodes, inner...)
	list.Nodes = append(nodes, jetCall(jetLeave, at))
}

// walkJet instruments the blocks and ranges inside nodes.
func walkJet(nodes []jet.Node) {
	for _, n := range nodes {
		switch n := n.(type) {
		case *jet.BlockNode:
			wrapBody(n.List, n.NodeBase)
			if n.Content != nil {
				walkJet(n.Content.Nodes)
			}
		case *jet.YieldNode:
			if n.Content != nil {
				walkJet(n.Content.Nodes)
			}
		case *jet.IfNode:
			walkList(n.List)
			walkList(n.ElseList)
		case *jet.RangeNode:
			if n.List != nil && (len(n.List.Nodes) == 0 || !isMark(n.List.Nodes[0])) {
				walkJet(n.List.Nodes)
				n.List.Nodes = append([]jet.Node{jetCall(jetMark, n.NodeBase), jetCall(jetTick, n.NodeBase)}, n.List.Nodes...)
			}
			walkList(n.ElseList)
		case *jet.TryNode:
			walkList(n.List)
			if n.Catch != nil {
				walkList(n.Catch.List)
			}
		case *jet.ListNode:
			walkList(n)
		}
	}
}

func walkList(l *jet.ListNode) {
	if l != nil {
		walkJet(l.Nodes)
	}
}

// jetCache is a jet.Cache that instruments every template it stores: the
// templates a set loads for include, import, extends and exec.
type jetCache struct{ m sync.Map }

// NewJetCache returns a jet.Cache for jet.WithCache that instruments the
// templates a set loads (include, import, extends, exec), so that
// ExecuteJet bounds them too.
func NewJetCache() jet.Cache { return &jetCache{} }

func (c *jetCache) Get(path string) *jet.Template {
	if t, ok := c.m.Load(path); ok {
		return t.(*jet.Template)
	}
	return nil
}

func (c *jetCache) Put(path string, t *jet.Template) {
	instrumentJet(t)
	c.m.Store(path, t)
}

// jetVars adds the hidden functions of b to vars.
func (b *budget) jetVars(vars jet.VarMap) jet.VarMap {
	out := make(jet.VarMap, len(vars)+4)
	for k, v := range vars {
		out[k] = v
	}
	fail := func(a jet.Arguments, err error) {
		if b.err == nil {
			b.err = err
			if a.NumOfArguments() == 1 {
				b.at = a.Get(0).String()
			}
		}
		a.Panicf("%w", err)
	}
	out.SetFunc(jetMark, func(jet.Arguments) reflect.Value { return reflect.Value{} })
	out.SetFunc(jetEnter, func(a jet.Arguments) reflect.Value {
		if err := b.enter("Jet blocks, includes and exec calls"); err != nil {
			fail(a, err)
		}
		return reflect.Value{}
	})
	out.SetFunc(jetLeave, func(jet.Arguments) reflect.Value { b.leave(); return reflect.Value{} })
	out.SetFunc(jetTick, func(a jet.Arguments) reflect.Value {
		if err := b.tick(); err != nil {
			fail(a, err)
		}
		return reflect.Value{}
	})
	return out
}

// ExecuteJet runs the Jet template tpl into w with vars and dot, bounded:
// blocks, includes and exec() calls nested at most MaxNesting deep, at
// most max bytes written, and done by deadline (zero: RenderTimeout from
// now). Templates the set loads for include, import, extends or exec are
// bounded when the set was made with jet.WithCache(NewJetCache()). A Go
// runtime error inside the template (a nil map indexed) is returned, not
// a crash. Errors of a bound wrap ErrLimit.
func ExecuteJet(tpl *jet.Template, w io.Writer, vars jet.VarMap, dot any, max int, deadline time.Time) error {
	return executeJet(tpl, w, vars, dot, max, newBudget(deadline))
}

func executeJet(tpl *jet.Template, w io.Writer, vars jet.VarMap, dot any, max int, b *budget) (err error) {
	instrumentJet(tpl)
	lw := &limitWriter{w: w, b: b, name: tpl.Name, max: max}
	depth := b.depth
	defer func() {
		b.depth = depth
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
		if b.err != nil {
			// The template and line of the block, include or loop
			// that went past the bound, else the template's name.
			err = fmt.Errorf("%s: %w", cmp.Or(b.at, tpl.Name), b.err)
			b.err, b.at = nil, ""
		}
	}()
	return tpl.Execute(lw, b.jetVars(vars), dot)
}

package template

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// The bounds of one evaluation. A Go stack overflow or an exhausted heap is
// a fatal error no recover() catches, so recursion, output and time are
// bounded before they grow: past a bound the evaluation stops with an error
// wrapping ErrLimit that names the template (and, for Jet, its line).
const (
	// MaxNesting bounds the nesting of Jet blocks (yield), includes and
	// exec() calls, and of Go templates ({{ template }}), within one
	// evaluation: 1,000. A recursive block that never stops fails here,
	// far below the stack's end.
	MaxNesting = 1000
	// MaxOutput bounds a string built by an expression's "+" and the text
	// Render builds around expressions: 4 MiB. The output of a Jet or Go
	// template is bounded by MaxFileSize while it is written.
	MaxOutput = 4 << 20
	// MaxExprNesting bounds the nesting of brackets in one expression
	// (parentheses, [ ] and { }): 256. expr-lang's parser recurses on
	// each; MaxExprNodes bounds the nodes: 10,000. expr-lang's memory
	// budget (1,000,000 units: list items, map entries, loop iterations)
	// bounds what one expression allocates.
	MaxExprNesting = 256
	// MaxExprNodes bounds the syntax nodes of one expression.
	MaxExprNodes = 10_000
	// RenderTimeout bounds one evaluation when Scope.Deadline is zero:
	// 10s, checked between expressions, at each template(), jet(), block
	// and include, each loop iteration and each write of a Jet or Go
	// template.
	RenderTimeout = 10 * time.Second
)

// ErrLimit is wrapped by the error of an evaluation stopped by a bound:
// nesting, output size or time.
var ErrLimit = errors.New("template: evaluation limit exceeded")

// budget is what one evaluation (a top-level Render, RenderValue,
// RenderJetFile, or a scaffold template) may still spend; nested
// template() and jet() calls share it.
type budget struct {
	deadline time.Time
	timeout  time.Duration
	depth    int
	ticks    int
	// err is the first bound exceeded: the evaluation's error even when
	// a Jet try block caught it; at is where ("template:line"), when
	// known.
	err error
	at  string
}

// newBudget returns the budget of an evaluation ending at deadline (zero:
// RenderTimeout from now).
func newBudget(deadline time.Time) *budget {
	now := time.Now()
	if deadline.IsZero() {
		deadline = now.Add(RenderTimeout)
	}
	return &budget{deadline: deadline, timeout: deadline.Sub(now).Round(time.Millisecond)}
}

// bounded returns s with a budget, its own when it has none yet.
func (s Scope) bounded() Scope {
	if s.budget == nil {
		s.budget = newBudget(s.Deadline)
	}
	return s
}

// check returns an error once the deadline has passed.
func (b *budget) check() error {
	if time.Now().After(b.deadline) {
		return fmt.Errorf("%w: evaluation took longer than %s (a loop or recursion that does not end?)", ErrLimit, b.timeout)
	}
	return nil
}

// tick is check, looking at the clock every 64th call (loop iterations).
func (b *budget) tick() error {
	b.ticks++
	if b.ticks&63 != 0 {
		return nil
	}
	return b.check()
}

// enter counts one more level of nesting; leave one less.
func (b *budget) enter(what string) error {
	if b.depth >= MaxNesting {
		return fmt.Errorf("%w: %s nested more than %d deep (a recursion that does not end?)", ErrLimit, what, MaxNesting)
	}
	b.depth++
	return b.check()
}

func (b *budget) leave() {
	if b.depth > 0 {
		b.depth--
	}
}

// limitWriter fails a write past max bytes or past the budget's deadline,
// so a template that loops or recurses stops while it writes.
type limitWriter struct {
	w      io.Writer
	b      *budget
	name   string
	n, max int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // the hidden calls of a Go template print ""
	}
	err := l.b.tick()
	if err == nil && l.n+len(p) > l.max {
		err = fmt.Errorf("%w: %w: %s renders over %d bytes", ErrLimit, ErrFileTooLarge, l.name, l.max)
	}
	if err != nil {
		if l.b.err == nil {
			l.b.err = err
		}
		return 0, err
	}
	l.n += len(p)
	return l.w.Write(p)
}

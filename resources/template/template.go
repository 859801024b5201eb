package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// Scope is what expressions can see.
type Scope struct {
	// Data is the run's data: manifest defaults, hierarchy overrides, the
	// apply resource's data, run overrides.
	Data map[string]any
	// Facts are the executing host's facts.
	Facts map[string]any
	// Environ is the process environment of the worker.
	Environ map[string]string
	// Dir is the base directory of file(), readFile(), template() and
	// jet() paths: the manifest's directory inside its bundle. Paths are
	// relative to it and never leave it (no absolute paths, no "..", no
	// symlinks leading out). Empty makes those functions fail.
	Dir string
	// Files, when set, reads those paths instead of Dir (the coordinator
	// reads them from the run's bundle). Paths are checked to be local
	// before it is called.
	Files func(name string) ([]byte, error)
	// OnRead, when set, is told of every file read and its content (the
	// bundle builder collects them); its error fails the read.
	OnRead func(name string, content []byte) error
	// Deadline bounds an evaluation over the scope (a Render, RenderValue
	// or RenderJetFile and the template() and jet() calls inside it);
	// zero is RenderTimeout from its start. Past it the evaluation fails
	// with an error wrapping ErrLimit.
	Deadline time.Time
	// Registrations answers registrations() (registrations.go); nil makes
	// it fail with ErrNoRegistrations.
	Registrations RegistrationLookup

	// budget is what the evaluation under way may still spend (nil
	// outside one); nested calls share it.
	budget *budget
	// depth counts nested template() and jet() calls.
	depth int
	// lenient makes a missing lookup without default render as nil.
	lenient bool
	// reuse is the environment Reusable made, for renders over the
	// scope it was made for (same budget, depth and leniency).
	reuse *reusedEnv
}

// reusedEnv is an expression environment made once (Scope.Reusable), or
// once per RenderValue: then env is made at its first template, and
// nothing is memoized.
type reusedEnv struct {
	env     map[string]any
	budget  *budget
	depth   int
	lenient bool
	// memoize is set by Reusable: values are remembered (memo.go).
	memoize bool
	// memo holds the values of the expressions already evaluated over
	// this environment (memo.go).
	memo memo
}

// Reusable returns s made ready for many renders (a compilation checking
// every resource over the same data): its budget and its expression
// environment are made once instead of at each Render, so every render
// through it shares one deadline, Deadline (or RenderTimeout from now).
// Set the returned scope's fields no further: make another one instead.
func (s Scope) Reusable() Scope {
	s = s.bounded()
	s.reuse = nil
	s.reuse = &reusedEnv{env: s.env(), budget: s.budget, depth: s.depth, lenient: s.lenient, memoize: true}
	return s
}

// Rearm readies s, a scope Reusable made, for one more evaluation once the
// last one has ended: its budget starts again (the deadline RenderTimeout
// from now, or Deadline; no nesting, no error), while its environment and
// the values it remembers are kept. A worker renders the resources of a
// segment so: one environment and one evaluation of each expression for
// the segment, each resource with a budget of its own. Evaluations through
// one reusable scope must not overlap. A scope Reusable did not make is
// returned as it is.
func (s Scope) Rearm() Scope {
	if s.reused() && s.reuse.memoize {
		*s.budget = *newBudget(s.Deadline)
	}
	return s
}

// once returns s (bounded) with an environment made at most once for the
// evaluation under way (a RenderValue over many strings), at its first
// template; s itself when it already has one.
func (s Scope) once() Scope {
	s = s.bounded()
	if s.reused() {
		return s
	}
	s.reuse = &reusedEnv{budget: s.budget, depth: s.depth, lenient: s.lenient}
	return s
}

// reused reports whether s.reuse was made for this scope (same budget,
// depth and leniency).
func (s Scope) reused() bool {
	r := s.reuse
	return r != nil && r.budget == s.budget && r.depth == s.depth && r.lenient == s.lenient
}

// envFor returns the scope's expression environment, the reused one when
// it was made for this scope.
func (s Scope) envFor() map[string]any {
	if !s.reused() {
		return s.env()
	}
	if s.reuse.env == nil {
		s.reuse.env = s.env()
	}
	return s.reuse.env
}

// SyntaxError is a template whose markers do not pair up.
type SyntaxError struct {
	// Template is the text being rendered.
	Template string
	// Offset is the byte offset of the unclosed opener.
	Offset int
	// Opener is "{{" or "${".
	Opener string
}

// Error implements error.
func (e *SyntaxError) Error() string {
	closer := "}}"
	if e.Opener == "${" {
		closer = "}"
	}
	return fmt.Sprintf("template: %q at offset %d has no closing %q (write \\%s for a literal %s)",
		e.Opener, e.Offset, closer, e.Opener, e.Opener)
}

// ExprError is an expression that failed to compile or run.
type ExprError struct {
	// Expr is the expression text, without its markers.
	Expr string
	// Err is expr-lang's error.
	Err error
}

// Error implements error.
func (e *ExprError) Error() string {
	return fmt.Sprintf("template: expression %q: %s", e.Expr, firstLine(e.Err.Error()))
}

// Unwrap returns the underlying error.
func (e *ExprError) Unwrap() error { return e.Err }

// HasTemplate reports whether s contains an expression opener ("{{" or
// "${", escaped or not). It is a cheap test: a string for which it is false
// renders to itself.
func HasTemplate(s string) bool {
	// Both openers hold a '{': one scan for it, not one per opener. At
	// a '{', "{{" starts there or "${" ends there.
	for from := 0; ; {
		i := strings.IndexByte(s[from:], '{')
		if i < 0 {
			return false
		}
		i += from
		if i+1 < len(s) && s[i+1] == '{' || i > 0 && s[i-1] == '$' {
			return true
		}
		from = i + 1
	}
}

// Render renders one string. Without markers s is returned unchanged (as a
// string); when s is exactly one expression the expression's native value is
// returned; otherwise the text with every expression's value formatted in.
//
// A missing key in lookup without a default returns a *MissingKeyError; a
// failing expression an *ExprError; unpaired markers a *SyntaxError.
func Render(s string, scope Scope) (any, error) {
	if !HasTemplate(s) {
		return s, nil
	}
	var buf [maxStackParts]part
	parts, err := parseInto(buf[:0], s)
	if err != nil {
		return nil, err
	}
	scope = scope.bounded()
	env, memo := scope.envFor(), scope.memo()
	if len(parts) == 1 && parts[0].expr {
		return memo.eval(parts[0].text, env, scope.budget)
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, p := range parts {
		if !p.expr {
			b.WriteString(p.text)
			continue
		}
		v, err := memo.eval(p.text, env, scope.budget)
		if err != nil {
			return nil, err
		}
		if err := format(&b, v); err != nil {
			return nil, &ExprError{Expr: p.text, Err: err}
		}
		if b.Len() > MaxOutput {
			return nil, &ExprError{Expr: p.text, Err: fmt.Errorf("%w: the text renders over %d bytes", ErrLimit, MaxOutput)}
		}
	}
	return b.String(), nil
}

// RenderValue renders every string inside v, walking map[string]any, []any,
// map[string]string and []string recursively; other values are returned as
// they are. The input is not modified. A map[string]any or []any in which
// nothing renders (no string holds a template, at any depth) is returned
// as it is, shared with the input (copy on write); the others are new
// maps and lists, map[string]string and []string made map[string]any and
// []any, nil ones empty. Errors name the path of the failing value
// ("env.1: ...", "content: ..."). The expression environment is made once
// for the whole value, at its first template.
func RenderValue(v any, scope Scope) (any, error) {
	out, _, err := renderValue(v, scope.once())
	if err != nil {
		return nil, unwindPath(err)
	}
	return out, nil
}

// renderValue renders v and reports whether the result is not v itself.
// Its error is the rendering error wrapped in a keyError per map key or
// list index above it (unwindPath makes them the PathError's path): the
// path is built only when there is an error.
func renderValue(v any, scope Scope) (any, bool, error) {
	switch t := v.(type) {
	case string:
		if !HasTemplate(t) {
			return v, false, nil // v, not t: no new interface value
		}
		out, err := Render(t, scope)
		if err != nil {
			return nil, false, err
		}
		return out, true, nil
	case map[string]any:
		if t == nil {
			return map[string]any{}, true, nil
		}
		out, err := renderMapAny(t, scope)
		if err != nil || out == nil {
			return v, false, err
		}
		return out, true, nil
	case []any:
		if t == nil {
			return []any{}, true, nil
		}
		out, err := renderListAny(t, scope)
		if err != nil || out == nil {
			return v, false, err
		}
		return out, true, nil
	case map[string]string:
		out, err := renderMap(t, scope)
		return out, true, err
	case []string:
		out, err := renderList(t, scope)
		return out, true, err
	default:
		return v, false, nil
	}
}

// renderMapAny renders each value of m; nil when none changed (m stands).
func renderMapAny(m map[string]any, scope Scope) (map[string]any, error) {
	var out map[string]any
	for k, e := range m {
		r, changed, err := renderValue(e, scope)
		if err != nil {
			return nil, &keyError{key: k, err: err}
		}
		if !changed {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(m))
			for k, e := range m {
				out[k] = e
			}
		}
		out[k] = r
	}
	return out, nil
}

// renderListAny renders each element of l; nil when none changed.
func renderListAny(l []any, scope Scope) ([]any, error) {
	var out []any
	for i, e := range l {
		r, changed, err := renderValue(e, scope)
		if err != nil {
			return nil, &keyError{index: i, list: true, err: err}
		}
		if !changed {
			continue
		}
		if out == nil {
			out = slices.Clone(l)
		}
		out[i] = r
	}
	return out, nil
}

// renderMap renders each value of a map into a map[string]any.
func renderMap[V any](m map[string]V, scope Scope) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, e := range m {
		r, _, err := renderValue(e, scope)
		if err != nil {
			return nil, &keyError{key: k, err: err}
		}
		out[k] = r
	}
	return out, nil
}

// renderList renders each element of a list into a []any.
func renderList[V any](l []V, scope Scope) ([]any, error) {
	out := make([]any, len(l))
	for i, e := range l {
		r, _, err := renderValue(e, scope)
		if err != nil {
			return nil, &keyError{index: i, list: true, err: err}
		}
		out[i] = r
	}
	return out, nil
}

// keyError is a rendering error below a map key, or a list index when
// list is set: RenderValue's path, made a PathError by unwindPath.
type keyError struct {
	key   string
	index int
	list  bool
	err   error
}

func (e *keyError) Error() string { return e.err.Error() }

// unwindPath turns the keyErrors around a rendering error into the path
// RenderValue reports, joined from the outermost key in as they always
// were: atPath(join(join("", k1), k2)..., err).
func unwindPath(err error) error {
	path := ""
	for {
		ke, ok := err.(*keyError)
		if !ok {
			return atPath(path, err)
		}
		seg := ke.key
		if ke.list {
			seg = strconv.Itoa(ke.index)
		}
		path = join(path, seg)
		err = ke.err
	}
}

// PathError says where in a value a rendering error happened.
type PathError struct {
	// Path is dotted: "properties.content", "env.1".
	Path string
	// Err is the rendering error (*MissingKeyError, *ExprError,
	// *SyntaxError).
	Err error
}

// Error implements error.
func (e *PathError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *PathError) Unwrap() error { return e.Err }

func atPath(path string, err error) error {
	if path == "" {
		return err
	}
	var pe *PathError
	if errors.As(err, &pe) {
		return &PathError{Path: join(path, pe.Path), Err: pe.Err}
	}
	return &PathError{Path: path, Err: err}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// format writes one value into mixed text.
func format(b *strings.Builder, v any) error {
	switch v := v.(type) {
	case nil:
	case string:
		b.WriteString(v)
	case []byte:
		b.Write(v)
	case map[string]any, []any, map[string]string, []string, []int, []float64, map[any]any:
		j, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(j)
	default:
		// Appendf into a buffer on the stack, not Fprintf into b: b
		// would escape, and Render's builder with it.
		var tmp [64]byte
		b.Write(fmt.Appendf(tmp[:0], "%v", v))
	}
	return nil
}

// maxCached bounds the program cache; beyond it programs are compiled but
// not kept, so a stream of distinct expressions cannot grow memory forever.
const maxCached = 4096

var (
	programs     sync.Map // expression text → *vm.Program
	programCount atomic.Int64
)

// eval compiles (once per distinct expression text) and runs expression e,
// unless the evaluation's deadline has passed.
func eval(e string, env map[string]any, b *budget) (any, error) {
	if b != nil {
		if err := b.check(); err != nil {
			return nil, &ExprError{Expr: e, Err: err}
		}
	}
	program, err := compile(e)
	if err != nil {
		return nil, &ExprError{Expr: e, Err: err}
	}
	out, err := expr.Run(program, env)
	if err != nil {
		var missing *MissingKeyError
		if errors.As(err, &missing) {
			return nil, missing
		}
		return nil, &ExprError{Expr: e, Err: err}
	}
	return out, nil
}

// compile returns the cached program of e. Programs are compiled against the
// shape of Scope.env, which is the same for every scope (only values
// differ), so one program serves every render.
func compile(e string) (*vm.Program, error) {
	if p, ok := programs.Load(e); ok {
		return p.(*vm.Program), nil
	}
	if err := checkNesting(e); err != nil {
		return nil, err
	}
	p, err := expr.Compile(e, expr.Env(Scope{}.env()), expr.MaxNodes(MaxExprNodes), boundedAdd, expr.Patch(addPatch{}))
	if err != nil {
		return nil, err
	}
	if programCount.Load() < maxCached {
		if _, loaded := programs.LoadOrStore(e, p); !loaded {
			programCount.Add(1)
		}
	}
	return p, nil
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// RenderEntry renders a data hierarchy entry the way CCM does. A lookup of a
// missing key without a default renders empty instead of failing, and ok
// reports whether the entry applies: false when it renders to "", or when
// it holds expressions and every one rendered empty (nil or ""). So
// "env:{{ lookup('facts.env') }}" on a host without that fact is skipped
// rather than matching an "env:" override. The result is always a string.
func RenderEntry(s string, scope Scope) (entry string, ok bool, err error) {
	var buf [maxStackParts]part
	parts, err := parseInto(buf[:0], s)
	if err != nil {
		return "", false, err
	}
	scope.lenient = true
	scope = scope.bounded()
	env := scope.env()
	var b strings.Builder
	exprs, matched := 0, false
	for _, p := range parts {
		if !p.expr {
			b.WriteString(p.text)
			continue
		}
		exprs++
		v, err := eval(p.text, env, scope.budget)
		if err != nil {
			return "", false, err
		}
		if v != nil && v != "" {
			matched = true
		}
		if err := format(&b, v); err != nil {
			return "", false, &ExprError{Expr: p.text, Err: err}
		}
	}
	out := b.String()
	if exprs == 0 {
		return out, out != "", nil
	}
	return out, matched, nil
}

package template

import (
	"strings"
	"sync"
)

// A compilation renders the same expressions over the same scope for
// every resource: e2e/bench's 20,000 files each render
// lookup('data.greeting'). Over a Reusable scope (one data, one set of
// facts, one set of files for the whole compilation) an expression's value
// does not change, so it is evaluated once and its value remembered. Only
// values nobody can modify are remembered (strings, numbers, booleans,
// nil); maps and lists, errors, and expressions calling registrations()
// (a live answer) are evaluated each time.

// MaxMemoized bounds the expressions a reusable scope remembers; past it
// the others are evaluated each time.
const MaxMemoized = 4096

// memo is a reusable scope's remembered values, by expression text.
type memo struct {
	mu     sync.Mutex
	values map[string]any
}

// memo returns the scope's memo, nil when the scope is not the one
// Reusable made (a nested template() call, another budget, a
// RenderValue's own environment).
func (s Scope) memo() *memo {
	if s.reused() && s.reuse.memoize {
		return &s.reuse.memo
	}
	return nil
}

// eval is the package's eval, remembering immutable values; m may be nil.
func (m *memo) eval(e string, env map[string]any, b *budget) (any, error) {
	if m == nil {
		return eval(e, env, b)
	}
	m.mu.Lock()
	v, ok := m.values[e]
	m.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := eval(e, env, b)
	if err != nil || !immutable(v) || strings.Contains(e, "registrations") {
		return v, err
	}
	m.mu.Lock()
	if len(m.values) < MaxMemoized {
		if m.values == nil {
			m.values = map[string]any{}
		}
		m.values[e] = v
	}
	m.mu.Unlock()
	return v, nil
}

// memoized returns how many values m remembers (tests).
func (m *memo) memoized() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.values)
}

// immutable reports whether v is a value callers cannot modify.
func immutable(v any) bool {
	switch v.(type) {
	case nil, string, bool, int, int64, float64, uint64, int32, uint32, float32, int8, int16, uint, uint8, uint16:
		return true
	}
	return false
}

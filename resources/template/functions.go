package template

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MissingKeyError is a lookup of a path that does not exist, without a
// default. Callers name the resource: `file#/etc/motd: lookup "data.port":
// key not found`.
type MissingKeyError struct {
	// Path is the looked-up path, as written ("data.port").
	Path string
}

// Error implements error.
func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("lookup %q: key not found", e.Path)
}

// functions lists the functions expressions may call beyond expr-lang's
// builtins, bound to one Scope. To add a CCM function, add an entry: the
// function must have the same Go type for every scope (compiled programs
// are shared between scopes), and should return (value, error).
func (s Scope) functions() map[string]any {
	return map[string]any{
		// lookup(path, [default]) walks data, facts or environ by a dotted path.
		"lookup": s.lookup,
		// file(path) and readFile(path) return a file's text, relative to Dir.
		"file":     s.readFile,
		"readFile": s.readFile,
		// template(path or text) renders a .templ file, a .jet file or text.
		"template": s.template,
		// jet(text or path.jet, [left, right]) renders a Jet template.
		"jet": s.jet,
		// registrations(cluster, protocol, service, address) returns the
		// live service entries (registrations.go).
		"registrations": s.registrations,
	}
}

// env is the expression environment of a scope: variables, then functions.
func (s Scope) env() map[string]any {
	data := s.Data
	if data == nil {
		data = map[string]any{}
	}
	facts := s.Facts
	if facts == nil {
		facts = map[string]any{}
	}
	environ := s.Environ
	if environ == nil {
		environ = map[string]string{}
	}
	// One literal, sized once: no functions() map copied in, no growth
	// from a small map to a table; file and readFile share one method
	// value. The names are functions()'s (TestEnvHasTheFunctions).
	readFile := s.readFile
	return map[string]any{
		"Data": data, "data": data,
		"Facts": facts, "facts": facts,
		"Environ": environ, "environ": environ,
		"lookup": s.lookup, "file": readFile, "readFile": readFile,
		"template": s.template, "jet": s.jet, "registrations": s.registrations,
	}
}

// lookup implements lookup(path, [default]). The first path segment selects
// data, facts or environ (any case; "env" is accepted for environ, as CCM's
// documentation spells it); the others walk maps by key and lists
// by index. A missing key returns the default when one is given, else a
// *MissingKeyError. Whole-number floats (JSON numbers) come back as int.
func (s Scope) lookup(path string, def ...any) (any, error) {
	if len(def) > 1 {
		return nil, fmt.Errorf("lookup %q: takes a path and at most one default, got %d defaults", path, len(def))
	}
	v, ok := s.walk(path)
	if !ok {
		if len(def) == 1 {
			return def[0], nil
		}
		if s.lenient {
			return nil, nil
		}
		return nil, &MissingKeyError{Path: path}
	}
	if f, isFloat := v.(float64); isFloat && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int(f), nil
	}
	return v, nil
}

func (s Scope) walk(path string) (any, bool) {
	segs := strings.Split(path, ".")
	var cur any
	switch strings.ToLower(segs[0]) {
	case "data":
		cur = s.Data
	case "facts":
		cur = s.Facts
	case "environ", "env":
		cur = s.Environ
	default:
		return nil, false
	}
	return Walk(cur, segs[1:])
}

// Walk follows path segments through nested maps and lists (a segment
// indexes a list by its decimal position) and reports whether the value is
// there.
func Walk(cur any, segs []string) (any, bool) {
	for _, seg := range segs {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case map[string]string:
			v, ok := c[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		case []string:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

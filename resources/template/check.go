package template

import (
	"maps"
	"slices"
	"strconv"
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
	parts, err := parse(s)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if !p.expr {
			continue
		}
		if _, err := compile(p.text); err != nil {
			return &ExprError{Expr: p.text, Err: err}
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

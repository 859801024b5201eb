package merge

import (
	"fmt"
	"slices"
	"strings"
)

const (
	// MaxDiffLines bounds Diff's output; further changes are counted.
	MaxDiffLines = 100
	// maxValueWidth bounds one value in a diff line.
	maxValueWidth = 120
)

// Diff describes how document old becomes new, one changed field a line,
// sorted by path:
//
//   - log.format: "json"
//   - log.color: true
//     ~ log.level: "debug" → "info"
//
// Lists of maps sharing a conventional key are compared item by item
// (path[key=value]), other lists of equal length by index (path[i]), the
// rest whole. Old nil means the document is new. At most MaxDiffLines
// lines are shown, then "… and N more changes".
func Diff(old, new any) string {
	var lines []string
	diff("", old, new, &lines)
	slices.SortStableFunc(lines, func(a, b string) int { return strings.Compare(a[2:], b[2:]) })
	if n := len(lines) - MaxDiffLines; n > 0 {
		lines = append(lines[:MaxDiffLines], fmt.Sprintf("… and %d more changes", n))
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

func diff(path string, old, new any, lines *[]string) {
	switch o := old.(type) {
	case map[string]any:
		if n, ok := new.(map[string]any); ok {
			for _, k := range sortedKeys(o) {
				if nv, ok := n[k]; ok {
					diff(child(path, k), o[k], nv, lines)
				} else {
					*lines = append(*lines, "- "+display(child(path, k))+": "+short(o[k]))
				}
			}
			for _, k := range sortedKeys(n) {
				if _, ok := o[k]; !ok {
					*lines = append(*lines, "+ "+display(child(path, k))+": "+short(n[k]))
				}
			}
			return
		}
	case []any:
		n, ok := new.([]any)
		if ok && diffKeyed(path, o, n, lines) {
			return
		}
		if ok && len(n) == len(o) {
			for i := range o {
				diff(fmt.Sprintf("%s[%d]", path, i), o[i], n[i], lines)
			}
			return
		}
	}
	switch {
	case Equal(old, new):
	case old == nil && path == "":
		*lines = append(*lines, "+ "+display(path)+": "+short(new))
	default:
		*lines = append(*lines, "~ "+display(path)+": "+short(old)+" → "+short(new))
	}
}

// diffKeyed diffs two lists of maps sharing a conventional key item by
// item ("listeners[port=443]"); it reports false, writing nothing, when the
// lists are not associative or repeat a key.
func diffKeyed(path string, o, n []any, lines *[]string) bool {
	key := detectKey(o, n)
	if key == "" {
		return false
	}
	index := func(l []any) (map[string]any, []string, bool) {
		m := make(map[string]any, len(l))
		var order []string
		for _, item := range l {
			k := ScalarKey(item.(map[string]any)[key])
			if _, dup := m[k]; dup {
				return nil, nil, false
			}
			m[k] = item
			order = append(order, k)
		}
		return m, order, true
	}
	om, oorder, ok1 := index(o)
	nm, norder, ok2 := index(n)
	if !ok1 || !ok2 {
		return false
	}
	at := func(k string) string { return fmt.Sprintf("%s[%s=%s]", path, key, k) }
	for _, k := range oorder {
		if nv, ok := nm[k]; ok {
			diff(at(k), om[k], nv, lines)
		} else {
			*lines = append(*lines, "- "+at(k)+": "+short(om[k]))
		}
	}
	for _, k := range norder {
		if _, ok := om[k]; !ok {
			*lines = append(*lines, "+ "+at(k)+": "+short(nm[k]))
		}
	}
	return true
}

func display(path string) string {
	if path == "" {
		return "(root)"
	}
	return path
}

func short(v any) string {
	s := compact(v)
	if len(s) > maxValueWidth {
		return s[:maxValueWidth] + "…"
	}
	return s
}

package merge

import (
	"slices"
	"strings"
)

// MaxDepth is how deeply maps and lists may nest in a desired document: a
// root map holding a map is two levels. Deeper documents are refused with
// ErrTooDeep rather than recursed into.
const MaxDepth = 100

// conventionalKeys are the fields that make a list of maps associative
// without configuration, in Metacontroller's order of precedence.
var conventionalKeys = []string{"containerPort", "port", "mountPath", "name", "uid", "ip", "path"}

// Merge applies the change from lastApplied to desired onto observed and
// returns the merged document (see the package documentation for the
// rules). observed nil means the document does not exist yet; lastApplied
// nil means nothing was applied before (or that record is lost): then
// nothing is deleted. Values are what encoding/json or gopkg.in/yaml.v3
// decode into an any: map[string]any, []any, strings, numbers, bools, nil.
//
// Merge never modifies its arguments; the result may share unchanged parts
// of observed. Errors wrap ErrConflictingOptions (from opts.Validate) or are
// *PathError naming the path (and the item) at fault.
func Merge(lastApplied, observed, desired any, opts Options) (any, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if desired == nil {
		return nil, &PathError{Err: ErrNullDesired}
	}
	m := merger{opts.rules()}
	if observed == nil {
		return m.take("", desired, 0)
	}
	return m.value("", lastApplied, observed, desired, 0)
}

type merger struct {
	rules
}

// value merges one desired value (never nil) at path into observed.
func (m *merger) value(path string, last, obs, des any, depth int) (any, error) {
	k := m.kinds[path]
	if k == kindAtomic {
		return m.take(path, des, depth)
	}
	switch d := des.(type) {
	case map[string]any:
		o, ok := obs.(map[string]any)
		if !ok || k == kindKeyed || k == kindSet {
			return m.take(path, des, depth) // a type change, or an error there
		}
		if depth >= MaxDepth {
			return nil, &PathError{Path: path, Err: ErrTooDeep}
		}
		l, _ := last.(map[string]any)
		return m.mergeMap(path, l, o, d, depth)
	case []any:
		o, ok := obs.([]any)
		if !ok {
			return m.take(path, des, depth)
		}
		if depth >= MaxDepth {
			return nil, &PathError{Path: path, Err: ErrTooDeep}
		}
		l, _ := last.([]any)
		return m.list(path, l, o, d, depth)
	default:
		return m.take(path, des, depth)
	}
}

// mergeMap merges map d into map o key by key; keys of l that d lacks are
// deleted, and so are keys d sets to null.
func (m *merger) mergeMap(path string, l, o, d map[string]any, depth int) (map[string]any, error) {
	out := make(map[string]any, len(o)+len(d))
	for k, v := range o {
		out[k] = v
	}
	for k := range l {
		if _, ok := d[k]; !ok {
			delete(out, k)
		}
	}
	for _, k := range sortedKeys(d) {
		dv := d[k]
		if dv == nil {
			delete(out, k)
			continue
		}
		var err error
		p := child(path, k)
		if ov, ok := o[k]; ok {
			out[k], err = m.value(p, l[k], ov, dv, depth+1)
		} else {
			out[k], err = m.take(p, dv, depth+1)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// list merges list d into list o by the kind of path.
func (m *merger) list(path string, l, o, d []any, depth int) (any, error) {
	var keys []string
	switch m.kinds[path] {
	case kindSet:
		return m.set(path, l, o, d)
	case kindKeyed:
		keys = m.keys[path]
		for _, list := range [][]any{d, o, l} {
			if err := checkItems(path, keys, list); err != nil {
				return nil, err
			}
		}
	default:
		key := detectKey(o, l, d)
		if key == "" {
			return m.take(path, d, depth)
		}
		keys = []string{key}
	}
	return m.keyed(path, keys, l, o, d, depth)
}

// keyed merges associative lists: items match by keys; observed items keep
// their order, those applied before and no longer desired are removed, new
// desired items are appended in desired order.
func (m *merger) keyed(path string, keys []string, l, o, d []any, depth int) ([]any, error) {
	lastByKey := make(map[string]map[string]any, len(l))
	for _, item := range l {
		it := item.(map[string]any)
		if k := itemKey(it, keys); lastByKey[k] == nil {
			lastByKey[k] = it
		}
	}
	desByKey := make(map[string]map[string]any, len(d))
	for _, item := range d {
		it := item.(map[string]any)
		k := itemKey(it, keys)
		if _, dup := desByKey[k]; dup {
			return nil, &PathError{Path: path, Item: item, Err: ErrDuplicateKey}
		}
		desByKey[k] = it
	}
	out := make([]any, 0, len(o)+len(d))
	done := make(map[string]bool, len(d))
	for _, item := range o {
		it := item.(map[string]any)
		k := itemKey(it, keys)
		if di, ok := desByKey[k]; ok {
			merged, err := m.mergeMap(path, lastByKey[k], it, di, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, merged)
			done[k] = true
			continue
		}
		if _, ours := lastByKey[k]; ours {
			continue
		}
		out = append(out, item)
	}
	for _, item := range d {
		if k := itemKey(item.(map[string]any), keys); !done[k] {
			taken, err := m.takeItem(path, item, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, taken)
			done[k] = true
		}
	}
	return out, nil
}

// set merges lists of scalars as sets.
func (m *merger) set(path string, l, o, d []any) ([]any, error) {
	for _, list := range [][]any{d, o, l} {
		if err := checkScalars(path, list); err != nil {
			return nil, err
		}
	}
	want := make(map[string]bool, len(d))
	for _, v := range d {
		want[ScalarKey(v)] = true
	}
	removed := map[string]bool{}
	for _, v := range l {
		if k := ScalarKey(v); !want[k] {
			removed[k] = true
		}
	}
	seen := make(map[string]bool, len(o)+len(d))
	out := make([]any, 0, len(o)+len(d))
	for _, list := range [][]any{o, d} {
		for _, v := range list {
			k := ScalarKey(v)
			if removed[k] || seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, v)
		}
	}
	return out, nil
}

// take returns a copy of desired value v at path with null map fields
// dropped, checking the options of every path inside it.
func (m *merger) take(path string, v any, depth int) (any, error) {
	k := m.kinds[path]
	switch t := v.(type) {
	case []any:
		if depth >= MaxDepth {
			return nil, &PathError{Path: path, Err: ErrTooDeep}
		}
		switch k {
		case kindSet:
			if err := checkScalars(path, t); err != nil {
				return nil, err
			}
			return m.set(path, nil, nil, t)
		case kindKeyed:
			if err := checkItems(path, m.keys[path], t); err != nil {
				return nil, err
			}
			seen := make(map[string]bool, len(t))
			for _, item := range t {
				key := itemKey(item.(map[string]any), m.keys[path])
				if seen[key] {
					return nil, &PathError{Path: path, Item: item, Err: ErrDuplicateKey}
				}
				seen[key] = true
			}
		}
		out := make([]any, len(t))
		for i, item := range t {
			var err error
			if out[i], err = m.takeItem(path, item, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		if k == kindKeyed || k == kindSet {
			return nil, &PathError{Path: path, Err: ErrNotList}
		}
		return m.takeItem(path, v, depth)
	default:
		if k == kindKeyed || k == kindSet {
			return nil, &PathError{Path: path, Err: ErrNotList}
		}
		return v, nil
	}
}

// takeItem copies a list item (or a map) without applying the options of
// path itself, which describe the list, not its items.
func (m *merger) takeItem(path string, v any, depth int) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		if depth >= MaxDepth {
			return nil, &PathError{Path: path, Err: ErrTooDeep}
		}
		out := make(map[string]any, len(t))
		for _, k := range sortedKeys(t) {
			if t[k] == nil {
				continue
			}
			var err error
			if out[k], err = m.take(child(path, k), t[k], depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []any:
		// A list directly inside a list has no path of its own.
		if depth >= MaxDepth {
			return nil, &PathError{Path: path, Err: ErrTooDeep}
		}
		out := make([]any, len(t))
		for i, item := range t {
			var err error
			if out[i], err = m.takeItem(path, item, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	default:
		return v, nil
	}
}

// detectKey returns the conventional key every item of lists shares, or ""
// when some item is not a map or no conventional key is common to all.
func detectKey(lists ...[]any) string {
	var common map[string]bool
	for _, list := range lists {
		for _, item := range list {
			obj, ok := item.(map[string]any)
			if !ok {
				return ""
			}
			if common == nil {
				common = make(map[string]bool, len(conventionalKeys))
				for _, k := range conventionalKeys {
					if _, ok := obj[k]; ok {
						common[k] = true
					}
				}
				continue
			}
			for k := range common {
				if _, ok := obj[k]; !ok {
					delete(common, k)
				}
			}
		}
	}
	for _, k := range conventionalKeys {
		if common[k] {
			return k
		}
	}
	return ""
}

// checkItems checks that every item is a map holding every key.
func checkItems(path string, keys []string, list []any) error {
	for _, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			return &PathError{Path: path, Item: item, Err: ErrNotObject}
		}
		for _, k := range keys {
			if _, ok := obj[k]; !ok {
				return &PathError{Path: path, Item: item, Err: &missingKeyError{k}}
			}
		}
	}
	return nil
}

type missingKeyError struct{ key string }

func (e *missingKeyError) Error() string { return ErrMissingKey.Error() + " " + `"` + e.key + `"` }
func (e *missingKeyError) Unwrap() error { return ErrMissingKey }

func checkScalars(path string, list []any) error {
	for _, item := range list {
		switch item.(type) {
		case map[string]any, []any:
			return &PathError{Path: path, Item: item, Err: ErrNotScalar}
		}
	}
	return nil
}

// itemKey is the identity of a list item under keys.
func itemKey(item map[string]any, keys []string) string {
	if len(keys) == 1 {
		return ScalarKey(item[keys[0]])
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = ScalarKey(item[k])
	}
	return strings.Join(parts, "\x00")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

package merge

import (
	"fmt"
	"slices"
	"strings"
)

// Options change how lists (and maps) at given paths merge. A path is the
// dotted chain of map keys from the root; a list level adds no segment, so
// the ports of every container are "spec.containers.ports". "" is the root.
type Options struct {
	// MergeKeys maps a path to the fields that identify an item of the list
	// there ("spec.ports": ["port", "protocol"]). Every item of observed,
	// last-applied and desired must be a map holding all of them.
	MergeKeys map[string][]string
	// Atomic lists paths whose value (a list or a map) is replaced whole by
	// desired.
	Atomic []string
	// Sets lists paths whose value is a list of scalars merged as a set:
	// observed order kept, duplicates collapsed, items applied before and no
	// longer desired removed, others' items kept.
	Sets []string
}

// Validate reports malformed options: a path in two of MergeKeys, Atomic and
// Sets, a merge key list that is empty or repeats a field, an empty field
// name. Errors wrap ErrConflictingOptions and name the path.
func (o Options) Validate() error {
	var errs []string
	owner := map[string]string{}
	claim := func(path, opt string) {
		if prev, ok := owner[path]; ok && prev != opt {
			errs = append(errs, fmt.Sprintf("path %q is in both %s and %s", path, prev, opt))
			return
		}
		owner[path] = opt
	}
	paths := make([]string, 0, len(o.MergeKeys))
	for p := range o.MergeKeys {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		claim(p, "merge_keys")
		keys := o.MergeKeys[p]
		if len(keys) == 0 {
			errs = append(errs, fmt.Sprintf("merge_keys %q: no key fields", p))
		}
		for i, k := range keys {
			if k == "" {
				errs = append(errs, fmt.Sprintf("merge_keys %q: empty key field", p))
			} else if slices.Contains(keys[:i], k) {
				errs = append(errs, fmt.Sprintf("merge_keys %q: key field %q repeated", p, k))
			}
		}
	}
	for _, p := range o.Atomic {
		claim(p, "atomic")
	}
	for _, p := range o.Sets {
		claim(p, "sets")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrConflictingOptions, strings.Join(errs, "; "))
	}
	return nil
}

// kind is how the value at one path merges.
type kind int

const (
	kindDefault kind = iota
	kindKeyed
	kindAtomic
	kindSet
)

// rules is Options indexed by path.
type rules struct {
	kinds map[string]kind
	keys  map[string][]string
}

func (o Options) rules() rules {
	r := rules{kinds: map[string]kind{}, keys: o.MergeKeys}
	for p := range o.MergeKeys {
		r.kinds[p] = kindKeyed
	}
	for _, p := range o.Atomic {
		r.kinds[p] = kindAtomic
	}
	for _, p := range o.Sets {
		r.kinds[p] = kindSet
	}
	return r
}

func child(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

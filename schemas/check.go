package schemas

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"
)

// pathNamed are the types whose name is an absolute path: names (and
// references to them) are cleaned before they identify a resource, so
// /out/x, /out/./x, //out/x and /out/../out/x are one resource.
var pathNamed = map[string]bool{"file": true, "archive": true, "document": true}

// cleanNames cleans path names and references to them, and reports names
// holding control characters (a newline or NUL in a name is a mistake, and
// makes logs and reports lie).
func cleanNames(m *Manifest, errs *errorList) {
	for i := range m.Resources {
		r := &m.Resources[i]
		if c := controlChar(r.Name); c >= 0 {
			errs.addf(r.Pos, r.Path, "%s name %q contains the control character %U", r.Type, r.Name, c)
		}
		if pathNamed[r.Type] && strings.HasPrefix(r.Name, "/") {
			r.Name = path.Clean(r.Name)
		}
		for _, refs := range [][]string{r.Require, r.Subscribe} {
			for j, ref := range refs {
				if typ, name, ok := strings.Cut(ref, "#"); ok && pathNamed[typ] && strings.HasPrefix(name, "/") {
					refs[j] = typ + "#" + path.Clean(name)
				}
			}
		}
	}
}

// controlChar returns the first control character of s, or -1.
func controlChar(s string) rune {
	for _, c := range s {
		if unicode.IsControl(c) {
			return c
		}
	}
	return -1
}

// CheckReferences checks a manifest's names and references: no two
// resources of a type share a name or alias, every require and subscribe
// entry is "type#name" or "type#alias" of another resource in the manifest,
// and with OrderingManifest none points to a later resource. The
// coordinator calls it after rendering templated names and references; Parse
// calls it when there is nothing to render. It returns Errors positioned at
// the resources concerned.
func CheckReferences(m *Manifest) error { return CheckReferencesWith(m, nil) }

// CheckReferencesWith is CheckReferences where a require or subscribe
// entry that names no resource of m is accepted when external(ref) is
// true: a child manifest's references to resources of its ancestors in the
// same session.
func CheckReferencesWith(m *Manifest, external func(ref string) bool) error {
	var errs errorList
	cleanNames(m, &errs)
	// Keyed by type and name (or alias): no "type#name" string is made per
	// resource. Aliases are rare: only theirs are marked.
	index := make(map[refKey]int, len(m.Resources))
	var isAlias map[refKey]bool
	claim := func(i int, r *Resource, key refKey, alias bool) {
		first, dup := index[key]
		if !dup {
			index[key] = i
			if alias {
				if isAlias == nil {
					isAlias = map[refKey]bool{}
				}
				isAlias[key] = true
			}
			return
		}
		f := &m.Resources[first]
		what := "resource"
		if alias {
			what = "alias"
		}
		was := "declared"
		if isAlias[key] {
			was = "the alias of " + f.Ref()
		}
		errs.addf(r.Pos, r.Path, "duplicate %s %s: already %s at %s (%s)", what, key, was, f.Pos, f.Path)
	}
	for i := range m.Resources {
		r := &m.Resources[i]
		claim(i, r, refKey{r.Type, r.Name}, false)
		if r.Alias != "" && r.Alias != r.Name {
			claim(i, r, refKey{r.Type, r.Alias}, true)
		}
	}
	// known lists every reference, for suggestions: made at the first
	// unknown one.
	var known []string
	suggestRef := func(ref string) string {
		if known == nil {
			known = make([]string, 0, len(index))
			for key := range index {
				known = append(known, key.String())
			}
			slices.Sort(known)
		}
		return suggest(ref, known)
	}
	for i := range m.Resources {
		r := &m.Resources[i]
		for _, kind := range [...]struct {
			name string
			refs []string
		}{{"require", r.Require}, {"subscribe", r.Subscribe}} {
			for j, ref := range kind.refs {
				path := func() string {
					if r.Path == "" {
						return ""
					}
					return fmt.Sprintf("%s.%s[%d]", r.Path, kind.name, j)
				}
				typ, name, ok := strings.Cut(ref, "#")
				if !ok || typ == "" || name == "" {
					errs.addf(r.Pos, path(), "%s %q is not a reference; write type#name or type#alias", kind.name, ref)
					continue
				}
				target, found := index[refKey{typ, name}]
				switch {
				case !found && external != nil && external(ref):
				case !found:
					errs.addf(r.Pos, path(), "%s %s: unknown resource%s", kind.name, ref, suggestRef(ref))
				case target == i:
					errs.addf(r.Pos, path(), "%s %s: a resource cannot %s itself", kind.name, ref, kind.name)
				case target > i && m.Ordering != OrderingGraph:
					errs.addf(r.Pos, path(), "%s %s points to a later resource; with ordering: manifest resources run in declaration order (move it, or use ordering: graph)", kind.name, ref)
				}
			}
		}
	}
	return errs.err()
}

// refKey is a reference, "type#name" or "type#alias", as a map key.
type refKey struct{ typ, name string }

// String is the reference as written.
func (k refKey) String() string { return k.typ + "#" + k.name }

// Lookup resolves a reference, "type#name" or "type#alias", to the index of
// the resource in m.Resources. It scans the resources; for many lookups build
// a map once with Index.
func (m *Manifest) Lookup(ref string) (int, bool) {
	typ, name, ok := strings.Cut(ref, "#")
	if !ok {
		return -1, false
	}
	alias := -1
	for i, r := range m.Resources {
		if r.Type != typ {
			continue
		}
		if r.Name == name {
			return i, true
		}
		if alias < 0 && r.Alias == name {
			alias = i
		}
	}
	return alias, alias >= 0
}

// Index maps every reference of m's resources ("type#name" and
// "type#alias") to the resource's index; when two resources claim a
// reference (which CheckReferences reports), the first wins.
func (m *Manifest) Index() map[string]int {
	index := make(map[string]int, 2*len(m.Resources))
	for i, r := range m.Resources {
		if _, dup := index[r.Ref()]; !dup {
			index[r.Ref()] = i
		}
	}
	for i, r := range m.Resources {
		if r.Alias == "" {
			continue
		}
		if _, dup := index[r.Type+"#"+r.Alias]; !dup {
			index[r.Type+"#"+r.Alias] = i
		}
	}
	return index
}

// IsTemplate reports whether s holds a template expression, {{ ... }} or
// ${ ... }.
func IsTemplate(s string) bool {
	return strings.Contains(s, "{{") || strings.Contains(s, "${")
}

// hasTemplatedRefs reports whether any name, alias or reference still needs
// rendering.
func hasTemplatedRefs(m *Manifest) bool {
	for _, r := range m.Resources {
		if IsTemplate(r.Name) || IsTemplate(r.Alias) {
			return true
		}
		for _, ref := range append(append([]string(nil), r.Require...), r.Subscribe...) {
			if IsTemplate(ref) {
				return true
			}
		}
	}
	return false
}

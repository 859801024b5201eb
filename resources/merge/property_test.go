package merge

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// gen builds random documents from a small alphabet, so that independently
// generated last-applied, observed and desired documents overlap: the same
// keys, the same list item names, type changes between them.
type gen struct{ r *rand.Rand }

func (g gen) scalar() any {
	switch g.r.IntN(4) {
	case 0:
		return g.r.IntN(3)
	case 1:
		return []string{"x", "y"}[g.r.IntN(2)]
	case 2:
		return g.r.IntN(2) == 0
	default:
		return float64(g.r.IntN(3)) + 0.5
	}
}

func (g gen) value(depth int) any {
	if depth >= 4 {
		return g.scalar()
	}
	switch g.r.IntN(5) {
	case 0, 1:
		return g.object(depth)
	case 2:
		return g.namedList(depth)
	case 3:
		l := make([]any, g.r.IntN(3))
		for i := range l {
			l[i] = g.scalar()
		}
		return l
	default:
		return g.scalar()
	}
}

func (g gen) object(depth int) map[string]any {
	m := map[string]any{}
	for _, k := range []string{"a", "b", "c", "d"} {
		if g.r.IntN(2) == 0 {
			m[k] = g.value(depth + 1)
		}
	}
	return m
}

// namedList is an associative list: maps with unique names.
func (g gen) namedList(depth int) []any {
	var l []any
	for _, i := range g.r.Perm(4)[:g.r.IntN(4)] {
		item := g.object(depth + 1)
		item["name"] = "n" + strconv.Itoa(i)
		l = append(l, item)
	}
	return l
}

func (g gen) maybe(depth int) any {
	if g.r.IntN(5) == 0 {
		return nil
	}
	return g.object(depth)
}

func TestMergeProperties(t *testing.T) {
	t.Parallel()
	g := gen{rand.New(rand.NewPCG(1, 2))}
	for i := range 3000 {
		desired := g.object(0)
		last, observed := g.maybe(0), g.maybe(0)

		// Desired, last-applied and observed all equal: nothing to do.
		same, err := Merge(desired, desired, desired, Options{})
		if err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		if !Equal(same, desired) {
			t.Fatalf("#%d: merging a document with itself changed it:\n  %s\n  %s", i, compact(desired), compact(same))
		}

		// Applying twice is stable: the second merge, whose last-applied is
		// the desired state of the first, changes nothing.
		first, err := Merge(last, observed, desired, Options{})
		if err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		second, err := Merge(desired, first, desired, Options{})
		if err != nil {
			t.Fatalf("#%d: second merge: %v", i, err)
		}
		if !Equal(first, second) {
			t.Fatalf("#%d: not stable\nlast     %s\nobserved %s\ndesired  %s\nfirst    %s\nsecond   %s",
				i, compact(last), compact(observed), compact(desired), compact(first), compact(second))
		}

		// Every field desired sets has its desired value in the result.
		if !contains(first, desired) {
			t.Fatalf("#%d: result lacks desired fields\ndesired %s\nresult  %s", i, compact(desired), compact(first))
		}
	}
}

// contains reports whether got holds want: want's map fields recursively,
// want's scalars and atomic lists exactly, want's named items by name.
func contains(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		gm, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			if !contains(gm[k], wv) {
				return false
			}
		}
		return true
	case []any:
		gl, ok := got.([]any)
		if !ok {
			return false
		}
		if detectKey(gl, w) != "name" {
			return Equal(gl, w)
		}
		for _, wi := range w {
			found := false
			for _, gi := range gl {
				if gi.(map[string]any)["name"] == wi.(map[string]any)["name"] && contains(gi, wi) {
					found = true
				}
			}
			if !found {
				return false
			}
		}
		return true
	default:
		return Equal(got, want)
	}
}

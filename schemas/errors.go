package schemas

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Limits on manifests. Each is checked before the expensive work starts.
const (
	// MaxManifestBytes is the largest manifest file Load and Parse accept.
	MaxManifestBytes = 16 << 20
	// MaxResources is the largest number of resources one manifest may
	// declare (defaults entries do not count).
	MaxResources = 50000
)

var (
	// ErrManifestTooLarge is wrapped by the error for a manifest bigger than
	// MaxManifestBytes.
	ErrManifestTooLarge = errors.New("schemas: manifest too large")
	// ErrTooManyResources is wrapped by the error for a manifest with more
	// than MaxResources resources.
	ErrTooManyResources = errors.New("schemas: too many resources")
	// ErrNoResources is wrapped by the error for a resources_jet_file
	// that renders no resources.
	ErrNoResources = errors.New("schemas: no resources")
)

// Error is one problem in a manifest: where it is, which field, what is wrong.
type Error struct {
	// Pos is the place in the input file; parts may be unknown (zero).
	Pos Position
	// Path is the field path in the document, such as
	// "resources[1].file[0]./tmp/x.content"; empty for file-level problems.
	Path string
	// Message says what is wrong, with a suggestion when there is one.
	Message string
	// Err is an optional sentinel the error wraps (ErrTooManyResources).
	Err error
}

// Error renders the error as "file:line:col: path: message", leaving out
// unknown parts.
func (e *Error) Error() string {
	var b strings.Builder
	if p := e.Pos.String(); p != "" {
		b.WriteString(p)
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap returns the wrapped sentinel, if any.
func (e *Error) Unwrap() error { return e.Err }

// Errors is every problem found in a manifest, in input order. Load, Parse
// and CheckReferences return it as their error, so
// errors.As(err, &schemas.Errors{}) gives the list and errors.As with a
// *Error target gives the first one.
type Errors []*Error

// Error joins the errors' messages, one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the errors, for errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}

// errorList collects errors, dropping exact repeats (a bad defaults entry is
// reported once, not once per resource it is merged into).
type errorList struct {
	errs Errors
	seen map[string]bool
}

func (l *errorList) add(e *Error) {
	key := e.Pos.String() + "\x00" + e.Message
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if l.seen[key] {
		return
	}
	l.seen[key] = true
	l.errs = append(l.errs, e)
}

func (l *errorList) addf(pos Position, path, format string, args ...any) {
	l.add(&Error{Pos: pos, Path: path, Message: fmt.Sprintf(format, args...)})
}

// err returns the collected errors, or nil.
func (l *errorList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	return l.errs
}

// sorted returns the collected errors in input order, or nil.
func (l *errorList) sorted() error {
	slices.SortStableFunc(l.errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Pos.Line, b.Pos.Line), cmp.Compare(a.Pos.Column, b.Pos.Column))
	})
	return l.err()
}

// suggest returns ` (did you mean "x"?)` for the candidate closest to word
// within edit distance 2, or "".
func suggest(word string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" || best == word {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

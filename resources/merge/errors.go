package merge

import "errors"

// Sentinels wrapped by Merge's and Options.Validate's errors; match them with
// errors.Is.
var (
	// ErrConflictingOptions: one path is named by two of merge_keys, atomic
	// and sets, or an option is malformed.
	ErrConflictingOptions = errors.New("conflicting merge options")
	// ErrMissingKey: an item of a list with explicit merge keys lacks one of
	// them.
	ErrMissingKey = errors.New("item has no merge key")
	// ErrNotObject: a list with explicit merge keys holds an item that is
	// not a map.
	ErrNotObject = errors.New("item is not a map")
	// ErrNotScalar: a list merged as a set holds a map or a list.
	ErrNotScalar = errors.New("set item is not a scalar")
	// ErrDuplicateKey: desired holds two items with the same merge key.
	ErrDuplicateKey = errors.New("duplicate merge key in desired")
	// ErrNotList: merge_keys or sets names a path whose desired value is not
	// a list.
	ErrNotList = errors.New("value is not a list")
	// ErrTooDeep: a document nests deeper than MaxDepth.
	ErrTooDeep = errors.New("document nests too deep")
	// ErrNullDesired: the desired document itself is null.
	ErrNullDesired = errors.New("desired document is null")
)

// PathError is an error at one place of a document: Path is dotted ("" is
// the root) and Item, when set, the list item at fault.
type PathError struct {
	Path string
	Item any
	Err  error
}

func (e *PathError) Error() string {
	where := e.Path
	if where == "" {
		where = "(root)"
	}
	if e.Item != nil {
		return where + ": " + e.Err.Error() + ": " + compact(e.Item)
	}
	return where + ": " + e.Err.Error()
}

func (e *PathError) Unwrap() error { return e.Err }

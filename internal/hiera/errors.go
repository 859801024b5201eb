package hiera

import (
	"errors"
	"fmt"
)

var (
	// ErrMerge is an unknown hierarchy merge mode.
	ErrMerge = errors.New("hiera: unknown merge mode")
	// ErrAssignment is a malformed k=v assignment.
	ErrAssignment = errors.New("hiera: malformed assignment")
	// ErrAnnotation is a data value that violates its annotation.
	ErrAnnotation = errors.New("hiera: annotation violated")
)

// EntryError is a hierarchy entry that failed to render.
type EntryError struct {
	// Index is the entry's place in hierarchy.order.
	Index int
	// Entry is the entry as written.
	Entry string
	// Err is the rendering error.
	Err error
}

// Error implements error.
func (e *EntryError) Error() string {
	return fmt.Sprintf("hierarchy.order[%d] %q: %v", e.Index, e.Entry, e.Err)
}

// Unwrap returns the rendering error.
func (e *EntryError) Unwrap() error { return e.Err }

// AnnotationError is a data key whose resolved value violates one of its
// annotations.
type AnnotationError struct {
	// Key is the dotted data key ("web.listen_port").
	Key string
	// Line is the key's line in the YAML source.
	Line int
	// Rule is "@require" or "@validate <expr>".
	Rule string
	// Message says what is wrong.
	Message string
}

// Error implements error.
func (e *AnnotationError) Error() string {
	return fmt.Sprintf("data.%s (line %d): %s: %s", e.Key, e.Line, e.Rule, e.Message)
}

// Is makes errors.Is(err, ErrAnnotation) true.
func (e *AnnotationError) Is(target error) bool { return target == ErrAnnotation }

var (
	// ErrDocument is a hiera document (--hiera) that cannot be read.
	ErrDocument = errors.New("hiera: bad hiera document")
	// ErrSource is a hiera source that cannot be fetched: an unknown
	// scheme, a missing key, an HTTP error, too large.
	ErrSource = errors.New("hiera: hiera source")
)

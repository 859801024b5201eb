package document

import (
	"errors"
	"fmt"
)

var (
	// ErrConflict is returned when a kv entry kept changing under us: every
	// one of MaxCASAttempts compare-and-swap writes lost against another
	// writer.
	ErrConflict = errors.New("document: the entry kept changing during apply")
	// ErrNoBuckets is returned for a kv:// document when the process has no
	// NATS connection to reach buckets through.
	ErrNoBuckets = errors.New("document: no NATS buckets in this process")
	// ErrSymlink is returned for a file document whose path is a symbolic
	// link: it is never read or written through (merging into what it
	// points to could write anywhere), nor replaced (which would drop the
	// document others wrote). Manage the link's target by its own path.
	ErrSymlink = errors.New("document: refusing to read or write a document through a symlink (name the link's target instead)")
	// ErrTooLarge is returned for a document larger than MaxDocumentBytes.
	ErrTooLarge = errors.New("document: too large")
)

// ParseError is a document that does not parse. File names the file (or
// kv:// entry) and Line the line of the error (0 when unknown).
type ParseError struct {
	File string
	Line int
	Err  error
}

func (e *ParseError) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	case e.File != "":
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return e.Err.Error()
}

func (e *ParseError) Unwrap() error { return e.Err }

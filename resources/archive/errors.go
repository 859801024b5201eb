package archive

import "errors"

var (
	// ErrChecksum is the error of a download whose sha256 is not the
	// checksum property. The download is discarded.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrEscape is the error of an archive entry that would land outside
	// extract_parent: an absolute name, a ".." that climbs out, or a
	// symbolic link that points (or resolves) outside. Nothing is extracted.
	ErrEscape = errors.New("archive entry escapes the extraction directory")
	// ErrTooLarge is the error of a download or an extraction past one of
	// the limits (MaxDownloadBytes, MaxExtractBytes, MaxEntries). Nothing is
	// kept.
	ErrTooLarge = errors.New("archive too large")
	// ErrUnsupportedEntry is the error of an entry that is neither a file, a
	// directory, a symbolic link nor a hard link (devices, fifos).
	ErrUnsupportedEntry = errors.New("unsupported archive entry")
	// ErrHTTPStatus is the error of a download answered with a status other
	// than 200.
	ErrHTTPStatus = errors.New("unexpected HTTP status")
)

// ErrLinkedParent is the error of an extract_parent that is a symbolic
// link: whoever owns it, it is never followed nor replaced. Name the
// directory it points to instead.
var ErrLinkedParent = errors.New("refusing to extract through a symlinked extract_parent")

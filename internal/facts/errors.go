package facts

import "errors"

var (
	// ErrFactsFile is a custom facts file that cannot be used: too large,
	// a symlink, not a map, or not valid JSON/YAML.
	ErrFactsFile = errors.New("facts: bad facts file")
	// ErrTooManyFiles is a facts.d directory with more than MaxFiles files.
	ErrTooManyFiles = errors.New("facts: too many facts files")
)

// ErrNotRegular is a name in the facts directory that is not a regular
// file (a FIFO, a device, a socket): it is skipped with a warning, never
// opened for reading.
var ErrNotRegular = errors.New("facts: not a regular file")

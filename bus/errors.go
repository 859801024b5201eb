package bus

import "errors"

// Errors translated at the bus boundary; match them with errors.Is.
var (
	// ErrNotFound: the key, object or message does not exist.
	ErrNotFound = errors.New("bus: not found")
	// ErrHistoryGone: a run's history was removed while it was read (the
	// run ended: its report is stored).
	ErrHistoryGone = errors.New("bus: history removed (the run ended)")
	// ErrRevisionMismatch: a compare-and-swap lost against another writer.
	ErrRevisionMismatch = errors.New("bus: revision mismatch")
	// ErrExists: a create found the key already there.
	ErrExists = errors.New("bus: already exists")
	// ErrVersion: a message carries an envelope version this build does not
	// know.
	ErrVersion = errors.New("bus: unknown message version")
	// ErrTooLarge: a message or object exceeds its limit.
	ErrTooLarge = errors.New("bus: too large")
	// ErrStoreInUse: another live server holds the store directory.
	ErrStoreInUse = errors.New("bus: store directory in use")
	// ErrDigestMismatch: an object stored under a digest name
	// ("sha256-<hex>") holds other content (someone overwrote it).
	ErrDigestMismatch = errors.New("bus: content does not match its digest name")
)

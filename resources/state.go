package resources

import "context"

// StateStore keeps small values a resource needs on its next run on the
// same host (the last-applied document of a document resource). Keys are
// chosen by the resource type ("document#/etc/app.json"); the store scopes
// them to the host. Implementations are safe for concurrent use.
type StateStore interface {
	// Get returns the value of key; ok is false when there is none.
	Get(ctx context.Context, key string) (val []byte, ok bool, err error)
	// Put stores val under key, replacing any previous value.
	Put(ctx context.Context, key string, val []byte) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

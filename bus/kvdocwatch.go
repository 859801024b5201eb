package bus

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// KeyChange is one change of a watched KV entry.
type KeyChange struct {
	// Revision is the entry's revision after the change.
	Revision uint64
	// Deleted is set when the entry was deleted or purged.
	Deleted bool
}

// WatchDocumentKey watches key of the existing bucket (as DocumentKV opens
// it: ErrNotFound, ErrOwnBucket, ErrPermissionDenied) and sends a
// KeyChange for every change made after the call — a put, a delete, a
// purge — until ctx ends; then it closes the channel. The watch is an
// ordered consumer the client re-creates after a reconnect.
func (b *Bus) WatchDocumentKey(ctx context.Context, bucket, key string) (<-chan KeyChange, error) {
	d, err := b.DocumentKV(ctx, bucket)
	if err != nil {
		return nil, err
	}
	w, err := d.b.kv.Watch(ctx, key, jetstream.UpdatesOnly())
	if err != nil {
		return nil, d.b.translate("watch", key, err)
	}
	out := make(chan KeyChange)
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue
				}
				c := KeyChange{Revision: e.Revision(), Deleted: e.Operation() != jetstream.KeyValuePut}
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

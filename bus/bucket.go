package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is a JetStream key-value bucket with errors translated to this
// package's sentinels.
type Bucket struct {
	kv jetstream.KeyValue
}

// Entry is a value and the revision it was stored at.
type Entry struct {
	Key      string
	Value    []byte
	Revision uint64
}

// Get returns the entry of key, or ErrNotFound.
func (b *Bucket) Get(ctx context.Context, key string) (Entry, error) {
	e, err := b.kv.Get(ctx, key)
	if err != nil {
		return Entry{}, b.translate("get", key, err)
	}
	return Entry{Key: key, Value: e.Value(), Revision: e.Revision()}, nil
}

// Create stores key only if it does not exist (ErrExists otherwise) and
// returns the new revision.
func (b *Bucket) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := retryNoLeader(ctx, func() (uint64, error) { return b.kv.Create(ctx, key, value) })
	if err != nil {
		return 0, b.translate("create", key, err)
	}
	return rev, nil
}

// Update stores key only if its revision is still rev (compare and swap);
// ErrRevisionMismatch otherwise.
func (b *Bucket) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	rev, err := retryNoLeader(ctx, func() (uint64, error) { return b.kv.Update(ctx, key, value, rev) })
	if err != nil {
		return 0, b.translate("update", key, err)
	}
	return rev, nil
}

// Put stores key unconditionally.
func (b *Bucket) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := retryNoLeader(ctx, func() (uint64, error) { return b.kv.Put(ctx, key, value) })
	if err != nil {
		return 0, b.translate("put", key, err)
	}
	return rev, nil
}

// Delete removes key; deleting a missing key is not an error.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := b.kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return b.translate("delete", key, err)
	}
	return nil
}

// Keys lists the bucket's keys (none is not an error).
func (b *Bucket) Keys(ctx context.Context) ([]string, error) {
	lister, err := b.kv.ListKeys(ctx)
	if err != nil {
		return nil, b.translate("list", "", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	return keys, nil
}

// KeysMatching lists the keys matching a subject-style filter such as
// "active.*" (none is not an error).
func (b *Bucket) KeysMatching(ctx context.Context, filter string) ([]string, error) {
	lister, err := b.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, b.translate("list", filter, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	return keys, nil
}

func (b *Bucket) translate(op, key string, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		err = ErrNotFound
	case errors.Is(err, jetstream.ErrKeyExists):
		// Create on an existing key and Update with a stale revision both
		// report "key exists" on some server versions.
		if op == "create" {
			err = ErrExists
		} else {
			err = ErrRevisionMismatch
		}
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || isWrongLastSequence(err):
		err = ErrRevisionMismatch
	}
	return fmt.Errorf("bus: %s %s %q: %w", op, b.kv.Bucket(), key, err)
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// WaitFor watches key until its value satisfies ok and returns that value;
// it returns ctx's error when ctx ends first, ErrNotFound when the key is
// deleted.
func (b *Bucket) WaitFor(ctx context.Context, key string, ok func([]byte) bool) ([]byte, error) {
	w, err := b.kv.Watch(ctx, key)
	if err != nil {
		return nil, b.translate("watch", key, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, open := <-w.Updates():
			if !open {
				return nil, fmt.Errorf("bus: watch %s %q: stopped", b.kv.Bucket(), key)
			}
			if e == nil {
				continue // the initial values have been delivered
			}
			if e.Operation() != jetstream.KeyValuePut {
				return nil, fmt.Errorf("bus: watch %s %q: %w", b.kv.Bucket(), key, ErrNotFound)
			}
			if ok(e.Value()) {
				return e.Value(), nil
			}
		}
	}
}

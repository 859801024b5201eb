package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// DocumentKV is a KV bucket as document resources (kv://bucket/key) use
// it: reads with revisions and compare-and-swap writes that report a lost
// race as ok false instead of an error.
type DocumentKV struct {
	b *Bucket
}

// DocumentKV opens the existing bucket name (ErrNotFound when there is
// none); document resources never create buckets.
func (b *Bus) DocumentKV(ctx context.Context, name string) (*DocumentKV, error) {
	kv, err := b.js.KeyValue(ctx, name)
	if err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			err = ErrNotFound
		}
		return nil, fmt.Errorf("bus: open bucket %s: %w", name, err)
	}
	return &DocumentKV{b: &Bucket{kv: kv}}, nil
}

// Get returns key's value and revision; found is false when it does not
// exist or was deleted.
func (d *DocumentKV) Get(ctx context.Context, key string) ([]byte, uint64, bool, error) {
	e, err := d.b.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	return e.Value, e.Revision, true, nil
}

// Create stores key if it does not exist; ok is false when it does.
func (d *DocumentKV) Create(ctx context.Context, key string, value []byte) (uint64, bool, error) {
	rev, err := d.b.Create(ctx, key, value)
	if errors.Is(err, ErrExists) || errors.Is(err, ErrRevisionMismatch) {
		return 0, false, nil
	}
	return rev, err == nil, err
}

// Update stores key if its revision is still rev; ok is false when another
// writer changed it.
func (d *DocumentKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, bool, error) {
	rev, err := d.b.Update(ctx, key, value, rev)
	if errors.Is(err, ErrRevisionMismatch) || errors.Is(err, ErrExists) {
		return 0, false, nil
	}
	return rev, err == nil, err
}

// EnsureDocumentBucket creates bucket name if it does not exist (one value
// of history, the bus's replicas) and opens it. Operators and tests use it
// to prepare buckets that kv:// documents then manage.
func (b *Bus) EnsureDocumentBucket(ctx context.Context, name string) (*DocumentKV, error) {
	bucket, err := b.bucket(ctx, jetstream.KeyValueConfig{Bucket: name, History: 1, Replicas: b.cfg.Replicas})
	if err != nil {
		return nil, err
	}
	return &DocumentKV{b: bucket}, nil
}

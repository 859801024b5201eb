package document

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/manifold-run/manifold/resources"
)

// MaxCASAttempts bounds how many times a kv document re-reads and re-merges
// an entry another writer changed between our read and our write; past it
// the apply fails with ErrConflict.
const MaxCASAttempts = 5

// KV is one NATS KV bucket as a kv document uses it. ok false from Create
// or Update means another writer got there first (the key exists, or its
// revision moved on).
type KV interface {
	// Get returns the entry's value and revision; found is false when the
	// key does not exist or was deleted.
	Get(ctx context.Context, key string) (value []byte, revision uint64, found bool, err error)
	// Create stores key only if it does not exist.
	Create(ctx context.Context, key string, value []byte) (revision uint64, ok bool, err error)
	// Update stores key only if its revision is still revision.
	Update(ctx context.Context, key string, value []byte, revision uint64) (newRevision uint64, ok bool, err error)
}

// Buckets opens existing KV buckets by name.
type Buckets interface {
	OpenKV(ctx context.Context, bucket string) (KV, error)
}

// BucketsFunc adapts a function to Buckets.
type BucketsFunc func(ctx context.Context, bucket string) (KV, error)

// OpenKV calls f.
func (f BucketsFunc) OpenKV(ctx context.Context, bucket string) (KV, error) { return f(ctx, bucket) }

// ownBucketPrefix starts the names of manifold's own buckets
// (bus.OwnBucketPrefix: manifold-runs, manifold-workers, manifold-results,
// ...), which kv:// documents may not name.
const ownBucketPrefix = "manifold-"

var (
	bucketName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	keyName    = regexp.MustCompile(`^[-/_=.a-zA-Z0-9]+$`)
)

// splitKV parses kv://bucket/key.
func splitKV(name string) (bucket, key string, err error) {
	rest := strings.TrimPrefix(name, kvScheme)
	bucket, key, _ = strings.Cut(rest, "/")
	if !bucketName.MatchString(bucket) {
		return "", "", fmt.Errorf("name %q: bucket %q: want letters, digits, - and _", name, bucket)
	}
	if strings.HasPrefix(bucket, ownBucketPrefix) {
		return "", "", fmt.Errorf("name %q: bucket %q is manifold's own (names starting with %q are reserved): kv:// documents may not write it", name, bucket, ownBucketPrefix)
	}
	if !keyName.MatchString(key) || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") {
		return "", "", fmt.Errorf("name %q: key %q: want letters, digits and -/_=. (not at either end: .)", name, key)
	}
	return bucket, key, nil
}

func (d *Document) checkKV(ctx context.Context, env *resources.Env, apply bool) (resources.Result, error) {
	if d.cfg.Buckets == nil {
		return resources.Result{}, fmt.Errorf("%s: %w", d.Name, ErrNoBuckets)
	}
	bucket, key, err := splitKV(d.Name)
	if err != nil {
		return resources.Result{}, err
	}
	kv, err := d.cfg.Buckets.OpenKV(ctx, bucket)
	if err != nil {
		return resources.Result{}, fmt.Errorf("%s: open bucket %s: %w", d.Name, bucket, err)
	}
	store := d.store(env)
	for attempt := 1; ; attempt++ {
		value, rev, found, err := kv.Get(ctx, key)
		if err != nil {
			return resources.Result{}, fmt.Errorf("%s: read: %w", d.Name, err)
		}
		p, err := d.plan(ctx, env, store, value)
		if err != nil {
			return resources.Result{}, err
		}
		if !p.changed {
			return resources.Result{}, d.settle(ctx, env, store, p)
		}
		res := resources.Result{Changed: true, Message: contentChange(found, p.diff, apply), Diff: p.diff}
		if !apply {
			return res, nil
		}
		out, err := p.tree.render(p.merged)
		if err != nil {
			return resources.Result{}, fmt.Errorf("%s: render: %w", d.Name, err)
		}
		if len(out) > MaxDocumentBytes {
			return resources.Result{}, fmt.Errorf("%s: %w: the merged document has %d bytes, the limit is %d", d.Name, ErrTooLarge, len(out), MaxDocumentBytes)
		}
		var ok bool
		if found {
			_, ok, err = kv.Update(ctx, key, out, rev)
		} else {
			_, ok, err = kv.Create(ctx, key, out)
		}
		if err != nil {
			return resources.Result{}, fmt.Errorf("%s: write: %w", d.Name, err)
		}
		if ok {
			return res, d.saveLast(ctx, store)
		}
		if attempt == MaxCASAttempts {
			return resources.Result{}, fmt.Errorf("%s: %w: another writer changed it before each of %d writes", d.Name, ErrConflict, MaxCASAttempts)
		}
	}
}

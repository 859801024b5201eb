package bus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// BundleScheme prefixes bundle references that name an object in any
// object store bucket, as CCM does: obj://bucket/key.
const BundleScheme = "obj://"

// PutBundle stores a bundle archive in the bundles object store under its
// content digest ("sha256-<hex>") and returns that name. Storing the same
// bytes twice stores them once.
func (b *Bus) PutBundle(ctx context.Context, archive []byte) (string, error) {
	name, err := b.putObject(ctx, "", archive)
	if err != nil {
		return "", fmt.Errorf("bus: store bundle: %w", err)
	}
	return name, nil
}

// putObject stores data in the bundles object store under prefix and its
// digest, once, and returns that name.
func (b *Bus) putObject(ctx context.Context, prefix string, data []byte) (string, error) {
	if int64(len(data)) > b.cfg.MaxBundleBytes {
		return "", fmt.Errorf("%w: %d bytes exceeds the limit of %d bytes", ErrTooLarge, len(data), b.cfg.MaxBundleBytes)
	}
	sum := sha256.Sum256(data)
	name := prefix + "sha256-" + hex.EncodeToString(sum[:])
	if _, err := b.bundles.GetInfo(ctx, name); err == nil {
		return name, nil
	}
	if _, err := b.bundles.PutBytes(ctx, name, data); err != nil {
		return "", fmt.Errorf("bus: store %s: %w", name, err)
	}
	return name, nil
}

// PutBlob stores data in the bundles store under a name made of prefix
// and its digest (stored once whatever the callers) and returns the name;
// GetBundle reads it back.
func (b *Bus) PutBlob(ctx context.Context, prefix string, data []byte) (string, error) {
	return b.putObject(ctx, prefix, data)
}

// GetBundle reads a bundle archive: ref is a name in the bundles store or
// obj://bucket/key for an object in another object store bucket.
func (b *Bus) GetBundle(ctx context.Context, ref string) ([]byte, error) {
	store, bucket, key := b.bundles, BucketBundles, ref
	if rest, ok := strings.CutPrefix(ref, BundleScheme); ok {
		var k string
		bucket, k, ok = strings.Cut(rest, "/")
		if !ok || bucket == "" || k == "" {
			return nil, fmt.Errorf("bus: bundle %q: want obj://bucket/key", ref)
		}
		var err error
		if store, err = b.js.ObjectStore(ctx, bucket); err != nil {
			if errors.Is(err, jetstream.ErrBucketNotFound) {
				err = ErrNotFound
			}
			return nil, fmt.Errorf("bus: bundle %q: bucket %s: %w", ref, bucket, err)
		}
		key = k
	}
	data, err := b.readObject(ctx, store, bucket, key, b.cfg.MaxBundleBytes)
	if err != nil {
		return nil, fmt.Errorf("bus: bundle %q: %w", ref, err)
	}
	return data, nil
}

// PutObject stores data under key in an object store bucket, creating the
// bucket if needed (tests and tools publishing obj:// bundles).
func (b *Bus) PutObject(ctx context.Context, bucket, key string, data []byte) error {
	store, err := b.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket, Replicas: b.cfg.Replicas})
	if err != nil {
		return fmt.Errorf("bus: object store %s: %w", bucket, err)
	}
	if _, err := store.PutBytes(ctx, key, data); err != nil {
		return fmt.Errorf("bus: put %s/%s: %w", bucket, key, err)
	}
	return nil
}

// PutReport stores the report of a finished run (any size: the object
// store chunks it).
func (b *Bus) PutReport(ctx context.Context, runID string, data []byte) error {
	store, err := b.reportStore(ctx)
	if err != nil {
		return err
	}
	if _, err := store.PutBytes(ctx, runID, data); err != nil {
		return fmt.Errorf("bus: store report of %s: %w", runID, err)
	}
	return nil
}

// GetReport reads the stored report of a finished run, or an error
// wrapping ErrNotFound.
func (b *Bus) GetReport(ctx context.Context, runID string) ([]byte, error) {
	store, err := b.reportStore(ctx)
	if err != nil {
		return nil, err
	}
	data, err := b.readObject(ctx, store, BucketReports, runID, 0)
	if err != nil {
		return nil, fmt.Errorf("bus: report of %s: %w", runID, err)
	}
	return data, nil
}

// reportStore returns the reports object store; an attached bus (clients,
// workers) opens it on first use, so roles that never read reports need
// no permission on it.
func (b *Bus) reportStore(ctx context.Context) (jetstream.ObjectStore, error) {
	b.reportsMu.Lock()
	defer b.reportsMu.Unlock()
	if b.reports != nil {
		return b.reports, nil
	}
	store, err := b.js.ObjectStore(ctx, BucketReports)
	if err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			err = ErrNotFound
		}
		return nil, fmt.Errorf("bus: object store %s: %w", BucketReports, err)
	}
	b.reports = store
	return store, nil
}

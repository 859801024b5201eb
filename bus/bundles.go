package bus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// BundleScheme prefixes bundle references that name an object in any
// object store bucket, as CCM does: obj://bucket/key.
const BundleScheme = "obj://"

// PutBundle stores a bundle archive in the bundles object store under its
// content digest ("sha256-<hex>") and returns that name. An object already
// stored under the name is kept only when its content is verified to be
// these bytes; anything else under the name (written by another
// submitter) is overwritten.
func (b *Bus) PutBundle(ctx context.Context, archive []byte) (string, error) {
	name, err := b.putObject(ctx, b.bundles, BucketBundles, "", archive)
	if err != nil {
		return "", fmt.Errorf("bus: store bundle: %w", err)
	}
	return name, nil
}

// KeepBundle is PutBundle for a Bus that is its bundles' only reader,
// as the embedded engine of `manifold apply` is (its server has no
// listener, and its coordinator, worker and command share one Bus): the
// bundle is named as PutBundle names it (its digest) and checked against
// the same size limit, and kept in this Bus's memory rather than put in
// the server's, where a memory-storage server would have kept it all the
// same. GetBundle of this Bus reads it; another Bus of the server finds
// nothing. The put's round trips were 1.3 ms of a converged 2,000-file
// apply's path, and its bytes held up the run's submission behind them on
// the one connection.
func (b *Bus) KeepBundle(archive []byte) (string, error) {
	if int64(len(archive)) > b.cfg.MaxBundleBytes {
		return "", fmt.Errorf("bus: store bundle: %w: %d bytes exceeds the limit of %d bytes", ErrTooLarge, len(archive), b.cfg.MaxBundleBytes)
	}
	sum := sha256.Sum256(archive)
	name := "sha256-" + hex.EncodeToString(sum[:])
	b.localMu.Lock()
	defer b.localMu.Unlock()
	if b.local == nil {
		b.local = map[string][]byte{}
	}
	b.local[name] = archive
	return name, nil
}

// localBundle is the archive of a bundle KeepBundle keeps.
func (b *Bus) localBundle(name string) ([]byte, bool) {
	b.localMu.Lock()
	defer b.localMu.Unlock()
	data, ok := b.local[name]
	return data, ok
}

// putObject stores data in store under prefix and its digest and returns
// that name. The upload is skipped only when the object stored under the
// name reads back as exactly data: a name is never trusted for its
// content.
func (b *Bus) putObject(ctx context.Context, store jetstream.ObjectStore, bucket, prefix string, data []byte) (string, error) {
	if int64(len(data)) > b.cfg.MaxBundleBytes {
		return "", fmt.Errorf("%w: %d bytes exceeds the limit of %d bytes", ErrTooLarge, len(data), b.cfg.MaxBundleBytes)
	}
	sum := sha256.Sum256(data)
	name := prefix + "sha256-" + hex.EncodeToString(sum[:])
	if info, err := store.GetInfo(ctx, name); err == nil {
		if info.Size == uint64(len(data)) && info.Digest == objectDigest(sum[:]) {
			if _, err := b.readVerified(ctx, store, bucket, name); err == nil {
				return name, nil
			}
		}
		// Other content under the name: replace it. A tombstone first, so
		// that the put does not purge the old chunks, which a submitter
		// may not do (its request would wait for a reply until ctx ends).
		if err := b.tombstone(ctx, bucket, info); err != nil {
			return "", fmt.Errorf("bus: replace %s: %w", name, err)
		}
	}
	if _, err := store.PutBytes(ctx, name, data); err != nil {
		return "", fmt.Errorf("bus: store %s: %w", name, err)
	}
	return name, nil
}

// PutBlob stores data in the bundles store under a name made of prefix
// and its digest (stored once whatever the callers) and returns the name;
// GetBundle reads it back, verified against the digest.
func (b *Bus) PutBlob(ctx context.Context, prefix string, data []byte) (string, error) {
	return b.putObject(ctx, b.bundles, BucketBundles, prefix, data)
}

// GetBundle reads a bundle archive: ref is a name in the bundles store or
// obj://bucket/key for an object in another object store bucket. A name
// in the bundles store must be a digest name ([prefix]sha256-<hex>, as
// PutBundle and PutBlob make), and so must any obj:// key of that form:
// the content read is checked against it, and a mismatch is an error
// wrapping ErrDigestMismatch naming the bundle. Other obj:// keys name
// objects the bucket's writers are trusted with.
func (b *Bus) GetBundle(ctx context.Context, ref string) ([]byte, error) {
	if data, ok := b.localBundle(ref); ok {
		return data, nil
	}
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
		if _, ok := nameDigest(key); !ok {
			data, err := b.readObject(ctx, store, bucket, key, b.cfg.MaxBundleBytes)
			if err != nil {
				return nil, fmt.Errorf("bus: bundle %q: %w", ref, err)
			}
			return data, nil
		}
	}
	data, err := b.readVerified(ctx, store, bucket, key)
	if err != nil {
		return nil, fmt.Errorf("bus: bundle %q: %w", ref, err)
	}
	return data, nil
}

// readVerified reads the object named name, a digest name, and checks
// that its content's SHA-256 is the name's.
func (b *Bus) readVerified(ctx context.Context, store jetstream.ObjectStore, bucket, name string) ([]byte, error) {
	want, ok := nameDigest(name)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a digest name ([prefix]sha256-<64 hex digits>)", ErrDigestMismatch, name)
	}
	data, err := b.readObject(ctx, store, bucket, name, b.cfg.MaxBundleBytes)
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(data); !bytes.Equal(sum[:], want) {
		return nil, fmt.Errorf("%w: object %s/%s holds content of sha256 %s, not the one its name says; refusing it",
			ErrDigestMismatch, bucket, name, hex.EncodeToString(sum[:]))
	}
	return data, nil
}

// tombstone marks an object deleted with a meta record alone (as the
// object store's Delete does before it purges the chunks): its chunks stay
// in the stream, unreachable.
func (b *Bus) tombstone(ctx context.Context, bucket string, info *jetstream.ObjectInfo) error {
	dead := jetstream.ObjectInfo{ObjectMeta: jetstream.ObjectMeta{Name: info.Name}, Bucket: bucket, NUID: info.NUID,
		Deleted: true, ModTime: time.Now().UTC()}
	data, err := json.Marshal(dead)
	if err != nil {
		return err
	}
	msg := nats.NewMsg("$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(info.Name)))
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	msg.Data = data
	if _, err := b.js.PublishMsg(ctx, msg); err != nil {
		return err
	}
	return nil
}

// nameDigest returns the SHA-256 a digest name ([prefix]sha256-<hex>)
// states.
func nameDigest(name string) ([]byte, bool) {
	i := strings.LastIndex(name, "sha256-")
	if i < 0 {
		return nil, false
	}
	h := name[i+len("sha256-"):]
	if len(h) != 2*sha256.Size {
		return nil, false
	}
	d, err := hex.DecodeString(h)
	return d, err == nil
}

// objectDigest is the digest an object store's meta record holds for
// content of SHA-256 sum.
func objectDigest(sum []byte) string { return "SHA-256=" + base64.URLEncoding.EncodeToString(sum) }

// putTask stores the body of a task too large for one message in the
// tasks object store (only coordinators write it), without its tokens,
// and returns the message that travels instead: the fields that route and
// identify the task, its tokens and the stored body's name.
func (b *Bus) putTask(ctx context.Context, t Task) (Task, error) {
	body := t
	body.Token, body.SegmentTokens = "", nil
	body.Segment = append([]SegmentItem(nil), t.Segment...)
	var tokens []string
	for i := range body.Segment {
		if body.Segment[i].Token != "" {
			tokens = make([]string, len(body.Segment))
		}
	}
	for i := range body.Segment {
		if tokens != nil {
			tokens[i] = body.Segment[i].Token
		}
		body.Segment[i].Token = ""
	}
	data, err := encode(body)
	if err != nil {
		return t, err
	}
	store, err := b.taskStore(ctx)
	if err != nil {
		return t, err
	}
	name, err := b.putObject(ctx, store, BucketTasks, "task-", data)
	if err != nil {
		return t, fmt.Errorf("bus: task %s of %d bytes: %w", t.MsgID(), len(data), err)
	}
	return Task{V: Version, RunID: t.RunID, RootRunID: t.RootRunID, Task: t.Task, Attempt: t.Attempt,
		Pool: t.Pool, Deadline: t.Deadline, Ref: name, Token: t.Token, SegmentTokens: tokens}, nil
}

// getTask reads the body of a task sent by reference, verified against
// its digest name, from the tasks store (or, for a task a coordinator of
// an earlier version published, from the bundles store), and gives it
// back the tokens of the message env.
func (b *Bus) getTask(ctx context.Context, env Task) (Task, error) {
	var data []byte
	store, err := b.taskStore(ctx)
	if err == nil {
		data, err = b.readVerified(ctx, store, BucketTasks, env.Ref)
	}
	if errors.Is(err, ErrNotFound) {
		data, err = b.readVerified(ctx, b.bundles, BucketBundles, env.Ref)
	}
	if err != nil {
		return env, err
	}
	var full Task
	if err := Decode(data, &full); err != nil {
		return env, err
	}
	full.Token = env.Token
	if len(env.SegmentTokens) > 0 {
		if len(env.SegmentTokens) != len(full.Segment) {
			return env, fmt.Errorf("%d segment tokens for %d segment items", len(env.SegmentTokens), len(full.Segment))
		}
		for i := range full.Segment {
			full.Segment[i].Token = env.SegmentTokens[i]
		}
	}
	return full, nil
}

// taskStore returns the tasks object store; an attached bus (workers)
// opens it on first use, a bus opened OnDemand creates it then.
func (b *Bus) taskStore(ctx context.Context) (jetstream.ObjectStore, error) {
	b.reportsMu.Lock()
	defer b.reportsMu.Unlock()
	if b.tasks != nil {
		return b.tasks, nil
	}
	get := b.js.ObjectStore
	if b.cfg.OnDemand {
		get = func(ctx context.Context, _ string) (jetstream.ObjectStore, error) {
			return b.js.CreateOrUpdateObjectStore(ctx, b.taskStoreConfig())
		}
	}
	store, err := get(ctx, BucketTasks)
	if err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			err = ErrNotFound
		}
		return nil, fmt.Errorf("bus: object store %s: %w", BucketTasks, err)
	}
	b.tasks = store
	return store, nil
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
// store chunks it), in the object store's format (writeObject). A report
// stored before under runID is replaced.
func (b *Bus) PutReport(ctx context.Context, runID string, data []byte) error {
	store, err := b.reportStore(ctx)
	if err != nil {
		return err
	}
	nuid, err := b.writeObject(ctx, store, BucketReports, runID, data)
	if err != nil {
		return fmt.Errorf("bus: store report of %s: %w", runID, err)
	}
	b.reportNUIDs.put(runID, nuid)
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
// no permission on it; a bus opened OnDemand creates it then.
func (b *Bus) reportStore(ctx context.Context) (jetstream.ObjectStore, error) {
	b.reportsMu.Lock()
	defer b.reportsMu.Unlock()
	if b.reports != nil {
		return b.reports, nil
	}
	get := b.js.ObjectStore
	if b.cfg.OnDemand {
		get = func(ctx context.Context, _ string) (jetstream.ObjectStore, error) {
			return b.js.CreateOrUpdateObjectStore(ctx, b.reportStoreConfig())
		}
	}
	store, err := get(ctx, BucketReports)
	if err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			err = ErrNotFound
		}
		return nil, fmt.Errorf("bus: object store %s: %w", BucketReports, err)
	}
	b.reports = store
	return store, nil
}

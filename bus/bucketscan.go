package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// scanIdle is how long Scan waits for the next entry before it asks the
// server whether more can come: entries may expire (the workers bucket
// has a TTL) between the consumer's creation and their delivery, and the
// server then never sends them.
const scanIdle = 500 * time.Millisecond

// Scan reads every live entry of bkt in one pass and calls visit for each,
// in stream order (not sorted by key). It uses one ordered consumer over
// the bucket's stream delivering the last message of each key (the one
// Keys uses, so a client allowed to list keys may scan): a bucket of N
// entries costs one consumer, where Keys and a Get per key cost N+1 round
// trips. Deleted and purged keys and expiry markers are skipped. Each key
// is visited at most once; a key that exists for the whole scan is
// visited, with its old or its new value when it is written meanwhile (a
// key the pass missed that way is read at the end: scanMissed), and a key
// created meanwhile may or may not be. A visit error stops the scan and is returned as it is; a
// bus error names the bucket. Scan blocks until the last entry was
// visited or ctx ends; the consumer is deleted when it returns.
func (b *Bus) Scan(ctx context.Context, bkt *Bucket, visit func(Entry) error) error {
	name := bkt.kv.Bucket()
	w, err := bkt.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return scanErr(name, err)
	}
	defer func() { _ = w.Stop() }()
	seen := map[string]struct{}{}
	var last uint64 // the stream sequence of the last entry delivered
	idle := time.NewTimer(scanIdle)
	defer idle.Stop()
	idles := 0
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("bus: scan %s: %w", name, ctx.Err())
		case e, open := <-w.Updates():
			if !open {
				return fmt.Errorf("bus: scan %s: the consumer stopped", name)
			}
			if e == nil {
				return b.scanMissed(ctx, bkt, seen, visit) // the watcher's initial values were delivered
			}
			last, idles = e.Revision(), 0
			idle.Reset(scanIdle)
			if _, dup := seen[e.Key()]; dup {
				continue
			}
			seen[e.Key()] = struct{}{}
			if err := visit(Entry{Key: e.Key(), Value: e.Value(), Revision: e.Revision()}); err != nil {
				return err
			}
		case <-idle.C:
			// Nothing for a while: done when nothing newer than the last
			// entry is stored, or after a second silence (what was pending
			// expired before it was delivered).
			st, err := bkt.kv.Status(ctx)
			if err != nil {
				return scanErr(name, err)
			}
			if s, ok := st.(*jetstream.KeyValueBucketStatus); ok && s.StreamInfo().State.LastSeq <= last || st.Values() == 0 || idles > 0 {
				return b.scanMissed(ctx, bkt, seen, visit)
			}
			idles++
			idle.Reset(scanIdle)
		}
	}
}

// scanMissed visits the keys the stream holds that the pass did not: a
// key rewritten while the pass ran can be missed by it (its old message is
// removed before it is delivered, and the watcher may say it is done
// before the new one comes). One request lists the stored keys (the
// stream's subject index); each missed one is read by itself. A key
// deleted or expired meanwhile is skipped.
func (b *Bus) scanMissed(ctx context.Context, bkt *Bucket, seen map[string]struct{}, visit func(Entry) error) error {
	keys, err := b.StoredKeys(ctx, bkt)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, ok := seen[k]; ok {
			continue
		}
		e, err := bkt.Get(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue
		} else if err != nil {
			return fmt.Errorf("bus: scan %s: %w", bkt.kv.Bucket(), err)
		}
		seen[k] = struct{}{}
		if err := visit(e); err != nil {
			return err
		}
	}
	return nil
}

func scanErr(bucket string, err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) {
		err = ErrNotFound
	}
	return fmt.Errorf("bus: scan %s: %w", bucket, err)
}

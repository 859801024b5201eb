package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// scanIdle is how long Scan waits for the next entry before it asks the
// server whether any is still pending: entries may expire (the workers
// bucket has a TTL) between the consumer's creation and their delivery,
// and the server then never sends them.
const scanIdle = 500 * time.Millisecond

// scanBuffer is how many entries the scan's consumer keeps in flight.
const scanBuffer = 1000

// Scan reads every live entry of bkt in one pass and calls visit for each,
// in stream order (not sorted by key). It uses one ordered consumer over
// the bucket's stream delivering the last message of each key, so a
// bucket of N entries costs one consumer and about N/1000 pull requests,
// where Keys and a Get per key cost N+1 round trips. Deleted and purged
// keys and expiry markers are skipped. An entry written while the scan
// runs may or may not be visited. A visit error stops the scan and is
// returned as it is; a bus error names the bucket. Scan blocks until the
// last entry was visited or ctx ends.
func (b *Bus) Scan(ctx context.Context, bkt *Bucket, visit func(Entry) error) error {
	name := bkt.kv.Bucket()
	prefix := "$KV." + name + "."
	c, err := b.js.OrderedConsumer(ctx, "KV_"+name, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{prefix + ">"},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
		// A backstop: the consumer is deleted when the scan ends.
		InactiveThreshold: 30 * time.Second,
	})
	if err != nil {
		return scanErr(name, err)
	}
	it, err := c.Messages(jetstream.PullMaxMessages(scanBuffer))
	if err != nil {
		return scanErr(name, err)
	}
	defer func() {
		it.Stop()
		// Else the server keeps it until InactiveThreshold, and a fleet
		// view polled every few seconds piles consumers up.
		if info := c.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = b.js.DeleteConsumer(dctx, "KV_"+name, info.Name)
			cancel()
		}
	}()
	// The ordered consumer is created by Messages: its pending count at
	// creation says whether there is anything to read at all.
	if info := c.CachedInfo(); info != nil && info.NumPending == 0 {
		return nil
	}
	for {
		nctx, cancel := context.WithTimeout(ctx, scanIdle)
		msg, err := it.Next(jetstream.NextContext(nctx))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("bus: scan %s: %w", name, ctx.Err())
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				return scanErr(name, err)
			}
			// Nothing for a while: done if nothing is pending any more.
			info, err := c.Info(ctx)
			if err != nil {
				return scanErr(name, err)
			}
			if info.NumPending == 0 {
				return nil
			}
			continue
		}
		md, err := msg.Metadata()
		if err != nil {
			return scanErr(name, err)
		}
		if live(msg) {
			e := Entry{Key: strings.TrimPrefix(msg.Subject(), prefix), Value: msg.Data(), Revision: md.Sequence.Stream}
			if err := visit(e); err != nil {
				return err
			}
		}
		if md.NumPending == 0 {
			return nil
		}
	}
}

// live reports whether a bucket message holds a value: not a delete or
// purge marker, nor a server marker of an expired or removed message.
func live(msg jetstream.Msg) bool {
	h := msg.Headers()
	if h == nil {
		return true
	}
	switch h.Get(headerKVOperation) {
	case "DEL", "PURGE":
		return false
	}
	return h.Get(headerMarkerReason) == ""
}

// headerKVOperation marks a key-value delete ("DEL") or purge ("PURGE").
const headerKVOperation = "KV-Operation"

func scanErr(bucket string, err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		err = ErrNotFound
	}
	return fmt.Errorf("bus: scan %s: %w", bucket, err)
}

package converge

import (
	"context"
	"fmt"
	"sync"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
)

// KVSource watches KV entries (*bus.Bus is one).
type KVSource interface {
	// WatchDocumentKey sends every change of bucket's key made after the
	// call until ctx ends, then closes the channel.
	WatchDocumentKey(ctx context.Context, bucket, key string) (<-chan bus.KeyChange, error)
}

// KVWatcher watches the KV entries of kv:// documents: one watch (an
// ordered consumer) per entry, however many resources name it; a change
// of the entry hints them ("kv put apps/web.config rev 7"). Like a file's
// event, the repair's own write is seen too: it costs one check that
// finds the resource stable.
//
// Set and Remove may be called from any goroutine; hints go to the channel
// given to NewKVWatcher, which the caller must keep reading.
type KVWatcher struct {
	src   KVSource
	hints chan<- Hint
	// base lives until Close: the watches' context (a watch outlives the
	// Set call that started it).
	base   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	entries map[kvEntry]*kvWatch
	byKey   map[string][]kvEntry
}

type kvEntry struct{ bucket, key string }

type kvWatch struct {
	keys map[string]bool
	stop context.CancelFunc
}

// NewKVWatcher returns a watcher of src's entries that sends its hints to
// hints.
func NewKVWatcher(src KVSource, hints chan<- Hint) *KVWatcher {
	base, cancel := context.WithCancel(context.Background())
	return &KVWatcher{src: src, hints: hints, base: base, cancel: cancel,
		entries: map[kvEntry]*kvWatch{}, byKey: map[string][]kvEntry{}}
}

// Set watches the KV entries among key's targets (others are ignored), in
// place of those it had (opening a watch asks the server: the bus's
// request timeout bounds it). An entry that
// cannot be watched (no such bucket, no permission) is an error naming
// it; the others are watched, and the caller covers the rest by interval
// checks.
func (k *KVWatcher) Set(key string, targets []resources.WatchTarget) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.remove(key)
	var first error
	for _, t := range targets {
		if t.Bucket == "" {
			continue
		}
		e := kvEntry{t.Bucket, t.Key}
		if w := k.entries[e]; w != nil {
			w.keys[key] = true
			k.byKey[key] = append(k.byKey[key], e)
			continue
		}
		wctx, stop := context.WithCancel(k.base)
		changes, err := k.src.WatchDocumentKey(wctx, e.bucket, e.key)
		if err != nil {
			stop()
			if first == nil {
				first = fmt.Errorf("converge: watch kv://%s/%s: %w", e.bucket, e.key, err)
			}
			continue
		}
		w := &kvWatch{keys: map[string]bool{key: true}, stop: stop}
		k.entries[e] = w
		k.byKey[key] = append(k.byKey[key], e)
		k.wg.Add(1)
		go k.forward(wctx, e, w, changes)
	}
	return first
}

// forward turns the changes of entry e into hints of its keys.
func (k *KVWatcher) forward(ctx context.Context, e kvEntry, w *kvWatch, changes <-chan bus.KeyChange) {
	defer k.wg.Done()
	for c := range changes {
		op := "put"
		if c.Deleted {
			op = "delete"
		}
		why := fmt.Sprintf("kv %s %s/%s rev %d", op, e.bucket, e.key, c.Revision)
		k.mu.Lock()
		keys := sortedKeys(w.keys)
		k.mu.Unlock()
		for _, key := range keys {
			select {
			case k.hints <- Hint{Key: key, Why: why}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// Remove stops watching key's entries (an entry's watch ends with its
// last key).
func (k *KVWatcher) Remove(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.remove(key)
}

func (k *KVWatcher) remove(key string) {
	for _, e := range k.byKey[key] {
		w := k.entries[e]
		if w == nil {
			continue
		}
		delete(w.keys, key)
		if len(w.keys) == 0 {
			w.stop()
			delete(k.entries, e)
		}
	}
	delete(k.byKey, key)
}

// Entries is the number of KV entries watched.
func (k *KVWatcher) Entries() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.entries)
}

// Close ends every watch and waits for them. Safe to call twice.
func (k *KVWatcher) Close() {
	k.cancel()
	k.wg.Wait()
}

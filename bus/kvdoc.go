package bus

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	// ErrPermissionDenied: the server refused this connection's user a
	// subject (a NATS permissions violation), reported as soon as the
	// server says so instead of when the request times out.
	ErrPermissionDenied = errors.New("bus: permission denied")
	// ErrOwnBucket: a document named one of manifold's own buckets (a
	// name starting with OwnBucketPrefix), which manifests may not write.
	ErrOwnBucket = errors.New("bus: manifold's own bucket")
)

// OwnBucketPrefix starts the names of manifold's own buckets and object
// stores (BucketRuns, BucketWorkers, ...); kv:// documents may not name
// them.
const OwnBucketPrefix = "manifold-"

// IsOwnBucket reports whether name is reserved for manifold itself.
func IsOwnBucket(name string) bool { return strings.HasPrefix(name, OwnBucketPrefix) }

// DocumentKV is a KV bucket as document resources (kv://bucket/key) use
// it: reads with revisions and compare-and-swap writes that report a lost
// race as ok false instead of an error.
//
// Every call fails at once with ErrPermissionDenied, naming the bucket,
// when the server refuses the connection's user the bucket's subjects (a
// worker whose NATS user was not granted the bucket), rather than when
// the caller's deadline passes.
type DocumentKV struct {
	b     *Bucket
	name  string
	watch *violations
}

// DocumentKV opens the existing bucket name (ErrNotFound when there is
// none; ErrOwnBucket for manifold's own; ErrPermissionDenied when this
// connection may not use it); document resources never create buckets.
func (b *Bus) DocumentKV(ctx context.Context, name string) (*DocumentKV, error) {
	if IsOwnBucket(name) {
		return nil, fmt.Errorf("bus: open bucket %s: %w", name, ErrOwnBucket)
	}
	d := &DocumentKV{name: name, watch: watchViolations(b.nc)}
	err := d.guard(ctx, func(ctx context.Context) error {
		kv, err := b.js.KeyValue(ctx, name)
		if err != nil {
			return err
		}
		d.b = &Bucket{kv: kv}
		return nil
	})
	switch {
	case errors.Is(err, ErrPermissionDenied):
		return nil, err
	case errors.Is(err, jetstream.ErrBucketNotFound):
		return nil, fmt.Errorf("bus: open bucket %s: %w", name, ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("bus: open bucket %s: %w", name, err)
	}
	return d, nil
}

// Get returns key's value and revision; found is false when it does not
// exist or was deleted.
func (d *DocumentKV) Get(ctx context.Context, key string) (value []byte, rev uint64, found bool, err error) {
	err = d.guard(ctx, func(ctx context.Context) error {
		e, err := d.b.Get(ctx, key)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		value, rev, found = e.Value, e.Revision, true
		return nil
	})
	return value, rev, found, err
}

// Create stores key if it does not exist; ok is false when it does.
func (d *DocumentKV) Create(ctx context.Context, key string, value []byte) (rev uint64, ok bool, err error) {
	err = d.guard(ctx, func(ctx context.Context) error {
		rev, err = d.b.Create(ctx, key, value)
		return err
	})
	if errors.Is(err, ErrExists) || errors.Is(err, ErrRevisionMismatch) {
		return 0, false, nil
	}
	return rev, err == nil, err
}

// Update stores key if its revision is still rev; ok is false when another
// writer changed it.
func (d *DocumentKV) Update(ctx context.Context, key string, value []byte, rev uint64) (newRev uint64, ok bool, err error) {
	err = d.guard(ctx, func(ctx context.Context) error {
		newRev, err = d.b.Update(ctx, key, value, rev)
		return err
	})
	if errors.Is(err, ErrRevisionMismatch) || errors.Is(err, ErrExists) {
		return 0, false, nil
	}
	return newRev, err == nil, err
}

// guard runs op, cutting it short with ErrPermissionDenied when the server
// reports a permissions violation on one of the bucket's subjects while it
// runs (NATS reports those asynchronously; the request itself would only
// time out).
func (d *DocumentKV) guard(ctx context.Context, op func(ctx context.Context) error) error {
	if d.watch == nil {
		return op(ctx)
	}
	denied, stop := d.watch.wait(d.name)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(ctx) }()
	select {
	case err := <-done:
		return err
	case subject := <-denied:
		cancel()
		<-done
		return fmt.Errorf("bus: bucket %s: %w: the server refused %q to this connection's user (grant it the bucket's subjects)", d.name, ErrPermissionDenied, subject)
	}
}

// violations fans a connection's permissions violations out to the
// document buckets waiting on it.
type violations struct {
	mu      sync.Mutex
	waiters map[*violationWaiter]struct{}
}

type violationWaiter struct {
	bucket string
	ch     chan string
}

// connViolations holds the violations of each connection DocumentKV was
// used on (one per connection, installed once, kept for its life).
var connViolations sync.Map // *nats.Conn → *violations

// watchViolations installs, once per connection, an error handler that
// reports permissions violations to the waiters, then calls the handler
// the connection had.
func watchViolations(nc *nats.Conn) *violations {
	if nc == nil {
		return nil
	}
	if v, ok := connViolations.Load(nc); ok {
		return v.(*violations)
	}
	v := &violations{waiters: map[*violationWaiter]struct{}{}}
	if actual, loaded := connViolations.LoadOrStore(nc, v); loaded {
		return actual.(*violations)
	}
	prev := nc.Opts.AsyncErrorCB
	nc.SetErrorHandler(func(c *nats.Conn, s *nats.Subscription, err error) {
		v.report(err)
		if prev != nil {
			prev(c, s, err)
		}
	})
	return v
}

// deniedSubject finds the subject in a NATS permissions violation.
var deniedSubject = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)permissions violation for (?:publish|subscription) to "([^"]+)"`)
})

func (v *violations) report(err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	m := deniedSubject().FindStringSubmatch(err.Error())
	if m == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for w := range v.waiters {
		if bucketSubject(w.bucket, m[1]) {
			select {
			case w.ch <- m[1]:
			default:
			}
		}
	}
}

// wait registers interest in violations of bucket's subjects until stop.
func (v *violations) wait(bucket string) (<-chan string, func()) {
	w := &violationWaiter{bucket: bucket, ch: make(chan string, 1)}
	v.mu.Lock()
	v.waiters[w] = struct{}{}
	v.mu.Unlock()
	return w.ch, func() {
		v.mu.Lock()
		delete(v.waiters, w)
		v.mu.Unlock()
	}
}

// bucketSubject tells whether subject is one of bucket's: its stream's API
// ($JS.API.*.KV_<bucket>[.…]) or its keys ($KV.<bucket>.<key>).
func bucketSubject(bucket, subject string) bool {
	if strings.HasPrefix(subject, "$KV."+bucket+".") {
		return true
	}
	stream := "KV_" + bucket
	for rest := subject; ; {
		i := strings.Index(rest, stream)
		if i < 0 {
			return false
		}
		end := rest[i+len(stream):]
		if (i == 0 || rest[i-1] == '.') && (end == "" || end[0] == '.') {
			return true
		}
		rest = rest[i+1:]
	}
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

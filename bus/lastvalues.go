package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// lastValuesBatch is how many keys one batched read asks for: the server
// answers at most 1,024 subjects per request (413 Too Many Results past
// it).
const lastValuesBatch = 1000

// lastValuesOneByOne is how many keys are read at once when the server
// does not answer batched reads.
const lastValuesOneByOne = 32

// lastValuesTimeout bounds LastValues when its context has no deadline.
const lastValuesTimeout = 30 * time.Second

// errNoBatchedGet: the server did not answer a batched direct get (a
// server before NATS 2.11, which does not know multi_last).
var errNoBatchedGet = errors.New("bus: batched direct get not answered")

// LastValues returns the current entries of keys in bkt, in no particular
// order; a key that does not exist, was deleted or expired is left out.
// It reads them with batched direct gets, lastValuesBatch keys a request
// (the values of 10,000 keys in 10 requests, where Get asks once per
// key), and key by key, lastValuesOneByOne at a time, from a server that
// does not answer them. ErrNotFound is never returned.
func (b *Bus) LastValues(ctx context.Context, bkt *Bucket, keys []string) ([]Entry, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, lastValuesTimeout)
		defer cancel()
	}
	name := bkt.kv.Bucket()
	var out []Entry
	for len(keys) > 0 {
		n := min(len(keys), lastValuesBatch)
		got, err := b.lastValues(ctx, name, keys[:n])
		if errors.Is(err, errNoBatchedGet) {
			got, err = oneByOne(ctx, bkt, keys)
			return append(out, got...), err
		}
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		keys = keys[n:]
	}
	return out, nil
}

// lastValues reads keys of bucket name with one batched direct get.
func (b *Bus) lastValues(ctx context.Context, name string, keys []string) ([]Entry, error) {
	prefix := "$KV." + name + "."
	subjects := make([]string, len(keys))
	for i, k := range keys {
		subjects[i] = prefix + k
	}
	req, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
		Batch     int      `json:"batch"`
	}{subjects, len(subjects)})
	if err != nil {
		return nil, err
	}
	inbox := b.nc.NewInbox()
	sub, err := b.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("bus: read %s: %w", name, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	// The replies come at the server's pace: they are not dropped.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, fmt.Errorf("bus: read %s: %w", name, err)
	}
	if err := b.nc.PublishRequest(b.apiPrefix()+"DIRECT.GET.KV_"+name, inbox, req); err != nil {
		return nil, fmt.Errorf("bus: read %s: %w", name, err)
	}
	out := make([]Entry, 0, len(keys))
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("bus: read %s: %w", name, err)
		}
		switch status := msg.Header.Get("Status"); status {
		case "":
		case "204": // end of the batch
			return out, nil
		case "404": // none of the keys
			return out, nil
		case "408", "503": // not understood (an older server), no responders
			return nil, errNoBatchedGet
		default:
			return nil, fmt.Errorf("bus: read %s: batched get answered %s %s", name, status, msg.Header.Get("Description"))
		}
		switch msg.Header.Get("KV-Operation") {
		case "DEL", "PURGE":
			continue
		}
		key, ok := strings.CutPrefix(msg.Header.Get("Nats-Subject"), prefix)
		if !ok {
			continue
		}
		rev, _ := strconv.ParseUint(msg.Header.Get("Nats-Sequence"), 10, 64)
		out = append(out, Entry{Key: key, Value: msg.Data, Revision: rev})
	}
}

// oneByOne reads keys of bkt with a Get each, lastValuesOneByOne at a
// time; a key that cannot be read is left out, as one that expired.
func oneByOne(ctx context.Context, bkt *Bucket, keys []string) ([]Entry, error) {
	var mu sync.Mutex
	var out []Entry
	var g errgroup.Group
	g.SetLimit(lastValuesOneByOne)
	for _, k := range keys {
		g.Go(func() error {
			e, err := bkt.Get(ctx, k)
			if err != nil {
				return nil
			}
			mu.Lock()
			out = append(out, e)
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	return out, ctx.Err()
}

package bus

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// StoredKeys returns the keys bkt holds a message for, sorted, from one
// stream info request: the server's index of subjects, read under the
// stream's lock, so a key rewritten meanwhile (a worker's heartbeat) is
// listed, where a watch of the bucket (Keys, Scan) may miss it. A key
// deleted or purged but whose marker is still stored is listed too: Get
// then returns ErrNotFound.
func (b *Bus) StoredKeys(ctx context.Context, bkt *Bucket) ([]string, error) {
	name := bkt.kv.Bucket()
	s, err := b.js.Stream(ctx, "KV_"+name)
	if err != nil {
		return nil, scanErr(name, err)
	}
	prefix := "$KV." + name + "."
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, fmt.Errorf("bus: keys of %s: %w", name, err)
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subj, prefix))
	}
	slices.Sort(keys)
	return keys, nil
}

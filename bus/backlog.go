package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Backlog is the queue of one pool: tasks published and not yet acked by
// a worker (waiting, or running), and when the oldest was published.
type Backlog struct {
	Pool   string    `json:"pool"`
	Tasks  int       `json:"tasks"`
	Oldest time.Time `json:"oldest,omitzero"`
}

// Backlogs returns the task queue of every pool that has one, sorted by
// pool. A pool without live workers shows its waiting tasks here too.
// Pinned pools' tasks are in StreamPinned (not read when the server has
// no such stream: one provisioned by an earlier version).
func (b *Bus) Backlogs(ctx context.Context) ([]Backlog, error) {
	byPool := map[string]*Backlog{}
	for _, x := range []struct{ stream, filter, prefix, pool string }{
		{StreamTasks, SubjectTasksAll, "manifold.tasks.", ""},
		{StreamPinned, SubjectPinnedAll, "manifold.pinned.", PinnedPoolPrefix},
	} {
		s, err := b.js.Stream(ctx, x.stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) && x.stream == StreamPinned {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("bus: backlog: %w", err)
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(x.filter))
		if err != nil {
			return nil, fmt.Errorf("bus: backlog: %w", err)
		}
		for subj, n := range info.State.Subjects {
			pool := x.pool + strings.TrimPrefix(subj, x.prefix)
			if x.pool == "" {
				pool = strings.TrimPrefix(subj, x.prefix)
			}
			bl := byPool[pool]
			if bl == nil {
				bl = &Backlog{Pool: pool}
				byPool[pool] = bl
			}
			bl.Tasks += int(n) // a pinned pool may have tasks in both streams (docs/bus.md)
			if msg, err := s.GetMsg(ctx, info.State.FirstSeq, jetstream.WithGetMsgSubject(subj)); err == nil && (bl.Oldest.IsZero() || msg.Time.Before(bl.Oldest)) {
				bl.Oldest = msg.Time
			}
		}
	}
	out := make([]Backlog, 0, len(byPool))
	for _, bl := range byPool {
		out = append(out, *bl)
	}
	slices.SortFunc(out, func(a, b Backlog) int { return strings.Compare(a.Pool, b.Pool) })
	return out, nil
}

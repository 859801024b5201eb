package bus

import (
	"context"
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
func (b *Bus) Backlogs(ctx context.Context) ([]Backlog, error) {
	s, err := b.js.Stream(ctx, StreamTasks)
	if err != nil {
		return nil, fmt.Errorf("bus: backlog: %w", err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(SubjectTasksAll))
	if err != nil {
		return nil, fmt.Errorf("bus: backlog: %w", err)
	}
	out := make([]Backlog, 0, len(info.State.Subjects))
	for subj, n := range info.State.Subjects {
		bl := Backlog{Pool: strings.TrimPrefix(subj, "manifold.tasks."), Tasks: int(n)}
		if msg, err := s.GetMsg(ctx, info.State.FirstSeq, jetstream.WithGetMsgSubject(subj)); err == nil {
			bl.Oldest = msg.Time
		}
		out = append(out, bl)
	}
	slices.SortFunc(out, func(a, b Backlog) int { return strings.Compare(a.Pool, b.Pool) })
	return out, nil
}

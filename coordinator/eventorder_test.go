package coordinator_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
)

// TestTaskIsSentBeforeItsEvents: a step's task messages go out before
// its events (task_finished of the outcome read, task_dispatched of the
// next task), so the server stores and delivers a task before the events
// around it; each task_dispatched event is still stamped before its task
// was published (the harness's per-task overhead is measured from that
// stamp).
func TestTaskIsSentBeforeItsEvents(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupOpts{})
	type seen struct {
		at   time.Time
		task *bus.Task
		ev   *bus.Event
	}
	const n = 5
	var mu sync.Mutex
	var msgs []seen
	finishedAll := make(chan struct{}) // closed at the n-th task_finished
	nFinished := 0
	// One subscription: the server delivers the coordinator's messages
	// to it in the order it read them.
	sub, err := tb.bus.Conn().Subscribe("manifold.>", func(m *nats.Msg) {
		s := seen{at: time.Now()}
		switch {
		case strings.HasPrefix(m.Subject, "manifold.tasks."):
			var task bus.Task
			if bus.DecodeTask(m.Data, &task) != nil {
				return
			}
			s.task = &task
		case strings.HasPrefix(m.Subject, "manifold.events."):
			var ev bus.Event
			if bus.Decode(m.Data, &ev) != nil || ev.Task == nil {
				return
			}
			s.ev = &ev
		default:
			return
		}
		mu.Lock()
		defer mu.Unlock()
		msgs = append(msgs, s)
		if s.ev != nil && s.ev.Kind == bus.EventTaskFinished {
			if nFinished++; nFinished == n {
				close(finishedAll)
			}
		}
	})
	require.NoError(t, err)
	require.NoError(t, sub.SetPendingLimits(-1, -1))
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, tb.bus.Conn().Flush())

	m := "ordering: graph\nresources:\n"
	for i := range n {
		m += fmt.Sprintf("  - {type: exec, name: e%d, command: /bin/true", i)
		if i > 0 {
			m += fmt.Sprintf(", require: [\"exec#e%d\"]", i-1)
		}
		m += "}\n"
	}
	rep, _ := tb.wait(t, tb.submit(t, m))
	require.Equal(t, n, rep.Counts.Changed)
	// This subscription hears the events a moment after the run's
	// follower.
	select {
	case <-finishedAll:
	case <-time.After(10 * time.Second):
		t.Fatal("not every task_finished event heard within 10s")
	}

	mu.Lock()
	defer mu.Unlock()
	taskAt := map[int]int{} // task → index of its message
	for k, s := range msgs {
		if s.task != nil {
			taskAt[s.task.Task] = k
		}
	}
	dispatched, finished := 0, 0
	for k, s := range msgs {
		if s.ev == nil {
			continue
		}
		i := *s.ev.Task
		at, ok := taskAt[i]
		require.True(t, ok, "no task message of task %d", i)
		switch s.ev.Kind {
		case bus.EventTaskDispatched:
			dispatched++
			require.Less(t, at, k, "task %d's task_dispatched event came before its task message", i)
			require.False(t, s.ev.Time.After(msgs[at].at), "task %d's task_dispatched event is stamped after its task was received", i)
		case bus.EventTaskFinished:
			finished++
			if next, ok := taskAt[i+1]; ok {
				require.Less(t, next, k, "task %d's task_finished event came before the next task's message", i)
			}
		}
	}
	require.Equal(t, n, dispatched)
	require.Equal(t, n, finished)
}

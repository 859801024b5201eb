package coordinator

import (
	"context"
	"sync"
)

// treeSlots counts, per run tree (by root run ID), the child runs this
// coordinator drives right now, so that one tree cannot hold an unbounded
// share of the coordinator (Config.MaxTreeLiveRuns). A parent whose child
// cannot have a slot waits for one: it is woken when a child run of the
// same tree ends here.
type treeSlots struct {
	mu    sync.Mutex
	live  map[string]int
	waits map[string]map[chan struct{}]struct{}
}

// acquire takes a slot of root's tree: always when force, otherwise only
// while fewer than limit are taken.
func (t *treeSlots) acquire(root string, limit int, force bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !force && t.live[root] >= limit {
		return false
	}
	if t.live == nil {
		t.live = map[string]int{}
	}
	t.live[root]++
	return true
}

// release gives a slot of root's tree back and wakes the runs waiting for
// one.
func (t *treeSlots) release(root string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live[root]--; t.live[root] <= 0 {
		delete(t.live, root)
	}
	for ch := range t.waits[root] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// count is the number of slots of root's tree taken.
func (t *treeSlots) count(root string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live[root]
}

// watch makes ch receive (without blocking the sender) whenever a slot
// of root's tree is released, until the returned func is called.
func (t *treeSlots) watch(root string, ch chan struct{}) func() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.waits == nil {
		t.waits = map[string]map[chan struct{}]struct{}{}
	}
	if t.waits[root] == nil {
		t.waits[root] = map[chan struct{}]struct{}{}
	}
	t.waits[root][ch] = struct{}{}
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.waits[root], ch)
		if len(t.waits[root]) == 0 {
			delete(t.waits, root)
		}
	}
}

// rootOf is the root run ID of rec's tree.
func rootOf(rec *record) string {
	if rec.RootRunID != "" {
		return rec.RootRunID
	}
	return rec.RunID
}

// childSlot takes a slot of the run's tree for the child run of apply
// task i, or queues the task until a child run of the tree ends. A run
// with no child run in progress always gets one: a chain of applies, each
// waiting for its child, never waits on itself.
func (r *run) childSlot(i int) bool {
	root := rootOf(r.rec)
	if r.c.trees.acquire(root, r.c.cfg.MaxTreeLiveRuns, len(r.children) == 0) {
		return true
	}
	if r.treeWake == nil {
		r.treeWake = make(chan struct{}, 1)
		r.unwatch = r.c.trees.watch(root, r.treeWake)
	}
	r.waiting = append(r.waiting, i)
	r.log.Info("child run waits: its run tree has as many child runs in progress as this coordinator allows",
		"resource", r.ref(i), "limit", r.c.cfg.MaxTreeLiveRuns)
	return false
}

// startWaiting starts the queued child runs that can have a slot now, in
// the order their apply resources were dispatched.
func (r *run) startWaiting(ctx, spanCtx context.Context) {
	waiting := r.waiting
	r.waiting = nil
	for k, i := range waiting {
		if !r.m.inFlight(i, r.m.tasks[i].attempt) {
			continue // cancelled meanwhile
		}
		r.startApply(ctx, r.taskSpan(spanCtx, i, false), i)
		if len(r.waiting) > 0 {
			// No slot again: the rest wait behind it.
			r.waiting = append(r.waiting, waiting[k+1:]...)
			return
		}
	}
}

// isWaiting reports whether apply task i waits for a slot (its child run
// is not started).
func (r *run) isWaiting(i int) bool {
	for _, j := range r.waiting {
		if j == i {
			return true
		}
	}
	return false
}

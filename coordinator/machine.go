package coordinator

import (
	"fmt"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/schemas"
)

// The run state machine: a pure fold of a run's history over its plan.
// It does no I/O and reads no clock; the run loop (run.go) feeds it facts
// read from the run's history stream and carries out the commands it
// returns. A coordinator resuming a run replays the history into a fresh
// machine and arrives at the same state, which is why decisions (dispatch,
// retry, skip, refresh, stop) are never written down.
//
// Scheduling is O(N + E) per run: every task counts its unfinished
// predecessors; a task whose count reaches zero joins the ready queue; an
// outcome touches only the task's dependents.

// maxSegment bounds the resources of one segment task in manifest
// ordering, a chain whose segments follow one another: fewer, longer
// segments are fewer round trips (2,000 files: 2 rather than 8). A
// worker answers a segment's converged members as it checks them, 64 at
// a time (worker.batchChunk), so the coordinator folds a long segment's
// first outcomes while the worker checks the next: each end of a segment
// is a hand-off nothing overlaps (the last outcomes folded, the next
// segment built, sent, decoded). Segments of 1,024 rather than 256 took
// a converged 20,000-file apply's run 626 → 567 ms; of 2,048 or 4,096
// it was slower (804, 1,041 ms; not looked into further).
const maxSegment = 1024

// maxGraphSegment bounds the resources of one segment task in graph
// ordering, whose segments run side by side: the ready tasks are shared
// among the pool's worker slots first (segmentBound), so this bound only
// cuts a share larger than it. A worker groups the writes of a segment's
// files under one pair of syncfs(2) calls, and a repair of 10,000 files in
// segments of 64 paid 157 pairs (5–25 ms each on a loaded disk: most of a
// storm's wall time), in segments of 256, 40.
const maxGraphSegment = 256

// minSpreadRun: a graph run of at most this many resources sends each in
// a task of its own (spreadOf), so they run side by side on every slot.
const minSpreadRun = 64

// taskRT is a task's state in the machine.
type taskRT struct {
	status     bus.TaskStatus
	attempt    int
	changed    bool
	refreshed  bool
	refresh    bool // the refresh flag of the current dispatch
	message    string
	diff       string
	err        string
	durationMS int64
	worker     string
	health     []bus.HealthCheck
	waiting    int // unfinished predecessors
	seg        int // first task of the segment it was dispatched in
	segAttempt int // the attempt of that first task
	segLen     int // on a segment's first task: its length
}

// cmdKind names what the run loop must do.
type cmdKind int

const (
	// cmdDispatch: publish tasks first..first+n-1 as one task message.
	cmdDispatch cmdKind = iota
	// cmdStartChild: start the child run of apply task Task.
	cmdStartChild
	// cmdSettled: task Task ended (event, span, log, metrics).
	cmdSettled
	// cmdCancelChild: cancel the child run of apply task Task (attempt).
	cmdCancelChild
	// cmdRetry: task Task failed and will run again (span, log).
	cmdRetry
	// cmdFinish: every task ended.
	cmdFinish
)

type command struct {
	kind    cmdKind
	task    int
	n       int // cmdDispatch: tasks in the segment
	attempt int
}

// sessionLookup finds an ancestor's finished resource by reference.
type sessionLookup func(ref string) (sessionRef, bool)

// machine is one run's state.
type machine struct {
	plan       *Plan
	session    sessionLookup
	pools      []string // per task
	tasks      []taskRT
	dependents [][]int
	ready      []int
	done       int
	counts     Counts
	stopped    bool // fail_on_error stopped dispatching
	cancelled  bool
	finished   bool
	segments   bool // ordering: manifest hands out segments
	// spread is, in ordering: graph, how many task messages the ready
	// tasks are shared among: consecutive ready resources of one pool are
	// handed out together, ceil(ready / spread) at a time (at most
	// maxGraphSegment), so a wide fan-out costs a task message per segment, not
	// per resource, while every slot of the pool still gets work. Zero
	// hands out one resource per task. It comes from the run header, so a
	// replay decides the same.
	spread int
	// diffBytes are the diffs kept so far (see keepDiff).
	diffBytes int
}

func newMachine(p *Plan, pools []string, session sessionLookup) *machine {
	n := len(p.Manifest.Resources)
	m := &machine{plan: p, pools: pools, session: session, tasks: make([]taskRT, n), dependents: make([][]int, n),
		segments: p.Manifest.Ordering != schemas.OrderingGraph}
	m.counts.Total = n
	seen := map[int]bool{}
	for i := range n {
		clear(seen)
		add := func(j int) {
			if j >= 0 && !seen[j] {
				seen[j] = true
				m.tasks[i].waiting++
				m.dependents[j] = append(m.dependents[j], i)
			}
		}
		add(p.After[i])
		for _, j := range p.Requires[i] {
			add(j)
		}
		for _, j := range p.Subscribes[i] {
			add(j)
		}
		m.tasks[i].status = bus.TaskPending
		m.tasks[i].seg = -1
	}
	return m
}

// start returns the commands of a run that has just begun.
func (m *machine) start() []command {
	for i := range m.tasks {
		if m.tasks[i].waiting == 0 {
			m.ready = append(m.ready, i)
		}
	}
	return m.schedule(nil)
}

// inFlight reports whether attempt of task i waits for its outcome.
func (m *machine) inFlight(i, attempt int) bool {
	t := &m.tasks[i]
	return t.status == bus.TaskDispatched && t.attempt == attempt
}

// apply folds one fact of the history into the state. Facts that no
// longer apply (an earlier attempt, a task already settled) change
// nothing: they are how at-least-once delivery shows up.
func (m *machine) apply(o bus.Outcome) []command {
	if m.finished {
		return nil
	}
	var cmds []command
	switch o.Kind {
	case bus.FactCancel:
		m.cancelled = true
		for i := range m.tasks {
			t := &m.tasks[i]
			if t.status.Final() {
				continue
			}
			if t.status == bus.TaskPending {
				t.message = "cancelled before it was dispatched"
			} else {
				t.message = "cancelled while " + string(t.status) + "; workers are told to stop it, its outcome is ignored"
				if m.plan.Manifest.Resources[i].Type == "apply" {
					cmds = append(cmds, command{kind: cmdCancelChild, task: i, attempt: t.attempt})
				}
			}
			cmds = m.settle(cmds, i, bus.TaskCancelled, t.message, "")
		}
		m.ready = nil
		return m.schedule(cmds)
	case bus.FactDeadline:
		if o.Task < 0 || o.Task >= len(m.tasks) || !m.inFlight(o.Task, o.Attempt) {
			return nil
		}
		m.releaseAfter(o.Task)
		cmds = m.settle(cmds, o.Task, bus.TaskFailed, "", o.Error)
		return m.schedule(cmds)
	case bus.FactOutcome:
	default:
		return nil
	}
	if o.Task < 0 || o.Task >= len(m.tasks) || !m.inFlight(o.Task, o.Attempt) {
		return nil
	}
	t := &m.tasks[o.Task]
	t.worker, t.durationMS, t.changed, t.refreshed = o.Worker, o.DurationMS, o.Changed, o.Refreshed
	t.health = o.HealthChecks
	t.diff = m.keepDiff(o.Diff)
	status := o.Status
	switch status {
	case bus.TaskChanged, bus.TaskStable, bus.TaskSkipped:
	case bus.TaskFailed:
		if t.attempt <= m.plan.Manifest.Resources[o.Task].Retry {
			m.releaseAfter(o.Task)
			t.status, t.err = bus.TaskPending, o.Error
			m.ready = append(m.ready, o.Task) // its predecessors have all ended
			return m.schedule(append(cmds, command{kind: cmdRetry, task: o.Task, attempt: t.attempt}))
		}
	default:
		status, o.Error = bus.TaskFailed, fmt.Sprintf("worker reported unknown status %q", o.Status)
	}
	cmds = m.settle(cmds, o.Task, status, o.Message, o.Error)
	switch {
	case status != bus.TaskFailed && status != bus.TaskSkipped:
	case m.plan.Manifest.FailOnError:
		// The worker was told to end the segment at the first failed or
		// skipped resource (bus.Task.ContinueAfterFailure unset).
		m.releaseAfter(o.Task)
	default:
		m.releaseRequirers(o.Task)
	}
	return m.schedule(cmds)
}

// releaseRequirers ends i's segment, after i failed or was skipped, before
// the first of its later resources that requires a failed or skipped
// resource of the segment: the worker executes the others (a failure does
// not stop the resources that do not depend on it) and stops there
// (worker.endsBefore, the same rule). The rest is given back.
func (m *machine) releaseRequirers(i int) {
	t := m.tasks[i]
	for j := i + 1; j < len(m.tasks); j++ {
		u := m.tasks[j]
		if u.seg != t.seg || u.segAttempt != t.segAttempt || u.status != bus.TaskDispatched {
			return
		}
		for _, p := range m.plan.Requires[j] {
			if s := m.tasks[p].status; p >= t.seg && p < j && (s == bus.TaskFailed || s == bus.TaskSkipped) {
				m.releaseAfter(j - 1)
				return
			}
		}
	}
}

// releaseAfter gives back the tasks after i in i's segment that are still
// in flight: a retried task ends its segment, and so does a task that
// timed out or the first that requires a failed one (the worker executes
// no more of it). They keep their attempt number: they were never
// executed.
func (m *machine) releaseAfter(i int) {
	t := m.tasks[i]
	for j := i + 1; j < len(m.tasks); j++ {
		u := &m.tasks[j]
		if u.seg != t.seg || u.segAttempt != t.segAttempt || u.status != bus.TaskDispatched {
			break
		}
		u.status = bus.TaskPending
		u.attempt--
		u.seg = -1
		if u.waiting == 0 {
			m.ready = append(m.ready, j)
		}
	}
}

// settle ends task i and releases its dependents.
func (m *machine) settle(cmds []command, i int, status bus.TaskStatus, message, errText string) []command {
	t := &m.tasks[i]
	t.status, t.message, t.err = status, message, errText
	if status != bus.TaskChanged {
		t.changed = false
	}
	switch status {
	case bus.TaskChanged:
		m.counts.Changed++
	case bus.TaskStable:
		m.counts.Stable++
	case bus.TaskFailed:
		m.counts.Failed++
		if m.plan.Manifest.FailOnError {
			m.stopped = true
		}
	default:
		m.counts.Skipped++
	}
	m.done++
	cmds = append(cmds, command{kind: cmdSettled, task: i, attempt: t.attempt})
	for _, d := range m.dependents[i] {
		dt := &m.tasks[d]
		dt.waiting--
		if dt.waiting == 0 && dt.status == bus.TaskPending {
			m.ready = append(m.ready, d)
		}
	}
	return cmds
}

// schedule takes ready tasks off the queue: skips those that must not
// run, dispatches the others (segments in manifest ordering), and reports
// the end of the run.
func (m *machine) schedule(cmds []command) []command {
	most := m.segmentBound()
	for len(m.ready) > 0 {
		i := m.ready[0]
		m.ready = m.ready[1:]
		t := &m.tasks[i]
		if t.status != bus.TaskPending || t.waiting > 0 {
			continue
		}
		if reason := m.skipReason(i); reason != "" {
			cmds = m.settle(cmds, i, bus.TaskSkipped, reason, "")
			continue
		}
		if m.plan.Manifest.Resources[i].Type == "apply" {
			m.dispatchOne(i)
			cmds = append(cmds, command{kind: cmdStartChild, task: i, attempt: t.attempt})
			continue
		}
		n := 1
		m.dispatchOne(i)
		for n < most && m.joins(i, i+n) {
			m.dispatchOne(i + n)
			m.tasks[i+n].seg, m.tasks[i+n].segAttempt = i, t.attempt
			n++
		}
		t.seg, t.segLen = i, n
		cmds = append(cmds, command{kind: cmdDispatch, task: i, n: n, attempt: t.attempt})
	}
	if m.done == len(m.tasks) && !m.finished {
		m.finished = true
		cmds = append(cmds, command{kind: cmdFinish})
	}
	return cmds
}

func (m *machine) dispatchOne(i int) {
	t := &m.tasks[i]
	t.attempt++
	t.status = bus.TaskDispatched
	t.seg, t.segLen, t.segAttempt = i, 1, t.attempt
	t.refresh = false
	for _, j := range m.plan.Subscribes[i] {
		t.refresh = t.refresh || m.tasks[j].changed
	}
	for _, ref := range m.plan.ExternalSubscribes[i] {
		if s, ok := m.session(ref); ok {
			t.refresh = t.refresh || s.Changed
		}
	}
}

// segmentBound is how many resources a task message of this step may
// hold: up to maxSegment in manifest ordering; in graph ordering the tasks
// ready now shared among spread messages.
func (m *machine) segmentBound() int {
	if m.segments {
		return maxSegment
	}
	if m.spread <= 0 {
		return 1
	}
	return min(max((len(m.ready)+m.spread-1)/m.spread, 1), maxGraphSegment)
}

// joins reports whether task j may run in the segment that starts at
// first and ends at j-1: same pool, not an apply, not a subscriber of a
// task in flight, and nothing outside the segment that must end first or
// that would make it skipped. A failure in the segment stops it there: the
// coordinator takes the rest back when it reads that outcome. In graph
// ordering the resources of a segment are independent: each is ready now.
func (m *machine) joins(first, j int) bool {
	if j >= len(m.tasks) || m.tasks[j].status != bus.TaskPending || m.pools[j] != m.pools[first] {
		return false
	}
	r := m.plan.Manifest.Resources[j]
	if r.Type == "apply" || len(m.plan.Subscribes[j]) > 0 || len(m.plan.External[j]) > 0 {
		return false
	}
	if !m.segments {
		return m.tasks[j].waiting == 0 && !m.stopped && m.skipReason(j) == ""
	}
	for _, p := range m.plan.Requires[j] {
		if p >= first && p < j {
			continue // in the segment: its failure stops the segment
		}
		if s := m.tasks[p].status; !s.Final() || s == bus.TaskFailed || s == bus.TaskSkipped || s == bus.TaskCancelled {
			return false
		}
	}
	return m.plan.After[j] == j-1 && !m.stopped
}

// skipReason says why a ready task must not run, or "".
func (m *machine) skipReason(i int) string {
	if m.stopped {
		return "not run: fail_on_error stopped the run after a failure"
	}
	status := func(ref string, s bus.TaskStatus) string {
		switch s {
		case bus.TaskFailed:
			return "skipped: " + ref + " failed"
		case bus.TaskSkipped, bus.TaskCancelled:
			return "skipped: " + ref + " was skipped"
		}
		return ""
	}
	res := m.plan.Manifest.Resources
	for _, deps := range [2][]int{m.plan.Requires[i], m.plan.Subscribes[i]} {
		for _, j := range deps {
			// The reference is built only for the reason (one per
			// requirement of every ready task otherwise).
			if s := m.tasks[j].status; s == bus.TaskFailed || s == bus.TaskSkipped || s == bus.TaskCancelled {
				return status(res[j].Ref(), s)
			}
		}
	}
	for _, ref := range m.plan.External[i] {
		if s, ok := m.session(ref); ok {
			if why := status(ref, s.Status); why != "" {
				return why
			}
		}
	}
	return ""
}

// inFlightSegments calls fn for every task message still waiting for
// outcomes (first task, length) and every apply task in flight.
func (m *machine) inFlightSegments(fn func(first, n int)) {
	last := -1
	for i := range m.tasks {
		t := &m.tasks[i]
		if t.status != bus.TaskDispatched || t.seg == last {
			continue
		}
		last = t.seg
		fn(t.seg, m.tasks[t.seg].segLen)
	}
}

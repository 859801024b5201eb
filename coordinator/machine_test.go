package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/schemas"
)

// The state machine's transitions, table-tested without NATS: a plan and
// a sequence of facts in, the commands out and the state they leave.

// planOf compiles a manifest for the machine.
func planOf(t *testing.T, src string) *Plan {
	t.Helper()
	m, err := schemas.ParseUnchecked("m.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Prepare(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// execs is a manifest of n exec resources r0..r(n-1); extra is added to
// resource i's properties when given.
func execs(ordering string, n int, extra map[int]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ordering: %s\nresources:\n", ordering)
	for i := range n {
		fmt.Fprintf(&b, "  - {type: exec, name: r%d, command: /bin/true%s}\n", i, extra[i])
	}
	return b.String()
}

func newTestMachine(p *Plan, spread int) *machine {
	pools := make([]string, len(p.Manifest.Resources))
	for i, r := range p.Manifest.Resources {
		pools[i] = r.Target
		if pools[i] == "" {
			pools[i] = bus.DefaultPool
		}
	}
	m := newMachine(p, pools, func(string) (sessionRef, bool) { return sessionRef{}, false })
	m.spread = spread
	return m
}

// show renders commands compactly: dispatch 0+3@1 (first task, length,
// attempt), settled 2@1, retry, child, cancel-child, finish.
func show(cmds []command) string {
	var out []string
	for _, c := range cmds {
		switch c.kind {
		case cmdDispatch:
			out = append(out, fmt.Sprintf("dispatch %d+%d@%d", c.task, c.n, c.attempt))
		case cmdStartChild:
			out = append(out, fmt.Sprintf("child %d@%d", c.task, c.attempt))
		case cmdSettled:
			out = append(out, fmt.Sprintf("settled %d@%d", c.task, c.attempt))
		case cmdRetry:
			out = append(out, fmt.Sprintf("retry %d@%d", c.task, c.attempt))
		case cmdCancelChild:
			out = append(out, fmt.Sprintf("cancel-child %d@%d", c.task, c.attempt))
		case cmdFinish:
			out = append(out, "finish")
		}
	}
	return strings.Join(out, ", ")
}

func outcome(task, attempt int, status bus.TaskStatus) bus.Outcome {
	return bus.Outcome{Task: task, Attempt: attempt, Status: status, Changed: status == bus.TaskChanged}
}

func TestMachineTransitions(t *testing.T) {
	t.Parallel()
	type step struct {
		fact bus.Outcome
		want string
	}
	tests := []struct {
		name   string
		src    string
		spread int
		start  string
		steps  []step
		counts Counts
	}{
		{
			name:  "manifest ordering: one segment, answered resource by resource",
			src:   execs("manifest", 3, nil),
			start: "dispatch 0+3@1",
			steps: []step{
				{outcome(0, 1, bus.TaskChanged), "settled 0@1"},
				{outcome(1, 1, bus.TaskStable), "settled 1@1"},
				{outcome(2, 1, bus.TaskStable), "settled 2@1, finish"},
			},
			counts: Counts{Total: 3, Changed: 1, Stable: 2},
		},
		{
			name:  "manifest ordering: a failure does not end the segment for resources that do not require it",
			src:   execs("manifest", 4, nil),
			start: "dispatch 0+4@1",
			steps: []step{
				{outcome(0, 1, bus.TaskStable), "settled 0@1"},
				{outcome(1, 1, bus.TaskFailed), "settled 1@1"},
				{outcome(2, 1, bus.TaskStable), "settled 2@1"},
				{outcome(3, 1, bus.TaskStable), "settled 3@1, finish"},
			},
			counts: Counts{Total: 4, Stable: 3, Failed: 1},
		},
		{
			name:  "manifest ordering: the segment ends before a resource requiring a failed one, which is skipped; the rest is sent again, same attempt",
			src:   execs("manifest", 4, map[int]string{2: ", require: [exec#r1]"}),
			start: "dispatch 0+4@1",
			steps: []step{
				{outcome(0, 1, bus.TaskStable), "settled 0@1"},
				{outcome(1, 1, bus.TaskFailed), "settled 1@1, settled 2@0, dispatch 3+1@1"},
				{outcome(3, 1, bus.TaskStable), "settled 3@1, finish"},
			},
			counts: Counts{Total: 4, Stable: 2, Failed: 1, Skipped: 1},
		},
		{
			name:  "manifest ordering: a failure with retries left ends the segment; the retry and the rest go out again",
			src:   execs("manifest", 3, map[int]string{0: ", retry: 1"}),
			start: "dispatch 0+3@1",
			steps: []step{
				{outcome(0, 1, bus.TaskFailed), "retry 0@1, dispatch 0+3@2"},
				{outcome(0, 2, bus.TaskChanged), "settled 0@2"},
				{outcome(1, 1, bus.TaskStable), "settled 1@1"},
				{outcome(2, 1, bus.TaskStable), "settled 2@1, finish"},
			},
			counts: Counts{Total: 3, Changed: 1, Stable: 2},
		},
		{
			name:  "manifest ordering: a segment is at most 1,024 resources",
			src:   execs("manifest", 1100, nil),
			start: "dispatch 0+1024@1",
		},
		{
			name:  "require: a failed requirement skips its dependents, transitively",
			src:   execs("graph", 3, map[int]string{1: ", require: [exec#r0]", 2: ", require: [exec#r1]"}),
			start: "dispatch 0+1@1",
			steps: []step{
				{outcome(0, 1, bus.TaskFailed), "settled 0@1, settled 1@0, settled 2@0, finish"},
			},
			counts: Counts{Total: 3, Failed: 1, Skipped: 2},
		},
		{
			name:  "stale and unknown facts change nothing",
			src:   execs("graph", 1, nil),
			start: "dispatch 0+1@1",
			steps: []step{
				{outcome(0, 2, bus.TaskStable), ""},
				{outcome(7, 1, bus.TaskStable), ""},
				{bus.Outcome{Kind: "gossip", Task: 0, Attempt: 1}, ""},
				{outcome(0, 1, bus.TaskStable), "settled 0@1, finish"},
				{outcome(0, 1, bus.TaskChanged), ""},
			},
			counts: Counts{Total: 1, Stable: 1},
		},
		{
			name:  "retry: a failure dispatches the next attempt",
			src:   execs("graph", 1, map[int]string{0: ", retry: 1"}),
			start: "dispatch 0+1@1",
			steps: []step{
				{outcome(0, 1, bus.TaskFailed), "retry 0@1, dispatch 0+1@2"},
				{outcome(0, 2, bus.TaskChanged), "settled 0@2, finish"},
			},
			counts: Counts{Total: 1, Changed: 1},
		},
		{
			name:  "deadline: fails the task in flight and gives the rest of its segment back",
			src:   execs("manifest", 3, nil),
			start: "dispatch 0+3@1",
			steps: []step{
				{bus.Outcome{Kind: bus.FactDeadline, Task: 0, Attempt: 1, Status: bus.TaskFailed}, "settled 0@1, dispatch 1+2@1"},
				{bus.Outcome{Kind: bus.FactDeadline, Task: 0, Attempt: 1, Status: bus.TaskFailed}, ""},
			},
		},
		{
			name:  "cancel: everything unfinished ends cancelled",
			src:   execs("graph", 2, map[int]string{1: ", require: [exec#r0]"}),
			start: "dispatch 0+1@1",
			steps: []step{
				{bus.Outcome{Kind: bus.FactCancel}, "settled 0@1, settled 1@0, finish"},
				{outcome(0, 1, bus.TaskChanged), ""},
			},
			counts: Counts{Total: 2, Skipped: 2},
		},
		{
			name:  "fail_on_error: nothing more is dispatched after a failure",
			src:   "ccm: {fail_on_error: true}\n" + strings.TrimPrefix(execs("graph", 2, map[int]string{1: ", require: [exec#r0]"}), ""),
			start: "dispatch 0+1@1",
			steps: []step{
				{outcome(0, 1, bus.TaskFailed), "settled 0@1, settled 1@0, finish"},
			},
		},
		{
			name:  "fail_on_error in a segment: the worker ends it at the failure, the rest is skipped",
			src:   "ccm: {fail_on_error: true}\n" + execs("manifest", 4, nil),
			start: "dispatch 0+4@1",
			steps: []step{
				{outcome(0, 1, bus.TaskStable), "settled 0@1"},
				{outcome(1, 1, bus.TaskFailed), "settled 1@1, settled 2@0, settled 3@0, finish"},
				{outcome(2, 1, bus.TaskStable), ""},
			},
			counts: Counts{Total: 4, Stable: 1, Failed: 1, Skipped: 2},
		},
		{
			name:  "subscribe: the subscriber waits and is refreshed in its own task",
			src:   execs("graph", 2, map[int]string{1: ", subscribe: [exec#r0], refreshonly: true"}),
			start: "dispatch 0+1@1",
			steps: []step{
				{outcome(0, 1, bus.TaskChanged), "settled 0@1, dispatch 1+1@1"},
			},
		},
		{
			name:  "graph ordering without spread: one resource per task",
			src:   execs("graph", 3, nil),
			start: "dispatch 0+1@1, dispatch 1+1@1, dispatch 2+1@1",
		},
		{
			name:   "graph ordering: ready resources shared among spread segments",
			src:    execs("graph", 10, nil),
			spread: 4,
			start:  "dispatch 0+3@1, dispatch 3+3@1, dispatch 6+3@1, dispatch 9+1@1",
			steps: []step{
				// The resources of a graph segment are independent: a
				// failure does not stop the others.
				{outcome(3, 1, bus.TaskFailed), "settled 3@1"},
				{outcome(4, 1, bus.TaskStable), "settled 4@1"},
			},
		},
		{
			name:   "graph ordering: at most 256 resources per segment",
			src:    execs("graph", 600, nil),
			spread: 2,
			start:  "dispatch 0+256@1, dispatch 256+256@1, dispatch 512+88@1",
		},
		{
			name:   "graph ordering: the ready resources shared among the slots below the bound",
			src:    execs("graph", 200, nil),
			spread: 2,
			start:  "dispatch 0+100@1, dispatch 100+100@1",
		},
		{
			name: "graph ordering: a segment ends at a resource not ready, a subscriber, an apply or another pool",
			src: execs("graph", 8, map[int]string{
				2: ", require: [exec#r7]",
				4: ", subscribe: [exec#r7]",
				6: ", target: other",
			}),
			spread: 1,
			start:  "dispatch 0+2@1, dispatch 3+1@1, dispatch 5+1@1, dispatch 6+1@1, dispatch 7+1@1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planOf(t, tt.src)
			m := newTestMachine(p, tt.spread)
			if got := show(m.start()); got != tt.start {
				t.Fatalf("start: %s\nwant:  %s", got, tt.start)
			}
			for k, s := range tt.steps {
				if got := show(m.apply(s.fact)); got != s.want {
					t.Fatalf("fact %d (%+v): %s\nwant:    %s", k, s.fact, got, s.want)
				}
			}
			if tt.counts != (Counts{}) && m.counts != tt.counts {
				t.Errorf("counts %+v, want %+v", m.counts, tt.counts)
			}
			// A replay of the same facts into a fresh machine arrives at
			// the same state: the decisions are never written down.
			r := newTestMachine(p, tt.spread)
			r.start()
			for _, s := range tt.steps {
				r.apply(s.fact)
			}
			if !slices.Equal(statuses(m), statuses(r)) || m.counts != r.counts || m.finished != r.finished {
				t.Errorf("replay differs: %v %+v, want %v %+v", statuses(r), r.counts, statuses(m), m.counts)
			}
		})
	}
}

func statuses(m *machine) []string {
	out := make([]string, len(m.tasks))
	for i, t := range m.tasks {
		out[i] = fmt.Sprintf("%s@%d", t.status, t.attempt)
	}
	return out
}

// TestMachineGraphSegmentsCoverEveryResource: a wide fan-out in segments
// ends with every resource settled once, whatever the order the outcomes
// come in, and never more task messages than resources.
func TestMachineGraphSegmentsCoverEveryResource(t *testing.T) {
	t.Parallel()
	const n = 1000
	p := planOf(t, execs("graph", n, nil))
	m := newTestMachine(p, 8)
	cmds := m.start()
	messages := 0
	var inFlight [][2]int // first, length
	for _, c := range cmds {
		if c.kind == cmdDispatch {
			messages++
			inFlight = append(inFlight, [2]int{c.task, c.n})
		}
	}
	if messages != 8 { // 125 each: the ready resources shared among the 8 slots
		t.Fatalf("%d task messages for %d ready resources over spread 8: %s", messages, n, show(cmds))
	}
	settled := map[int]int{}
	// Answer the segments last first, each in order.
	for k := len(inFlight) - 1; k >= 0; k-- {
		seg := inFlight[k]
		for i := seg[0]; i < seg[0]+seg[1]; i++ {
			for _, c := range m.apply(outcome(i, 1, bus.TaskStable)) {
				if c.kind == cmdSettled {
					settled[c.task]++
				}
			}
		}
	}
	if len(settled) != n || !m.finished || m.counts.Stable != n {
		t.Fatalf("%d settled, finished %v, counts %+v", len(settled), m.finished, m.counts)
	}
	for i, k := range settled {
		if k != 1 {
			t.Fatalf("resource %d settled %d times", i, k)
		}
	}
}

package coordinator

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/manifold-run/manifold/bus"
)

// TestEventsReadLeavesUnreadTaskEventsOut: with Config.EventsRead, a run
// tree publishes a resource's task_dispatched and task_finished events
// only when their kind is read (child runs' too: they are asked by the
// root run's ID); run events always are, and the report is whole. A
// tree EventsRead knows nothing of (nil) publishes every event.
func TestEventsReadLeavesUnreadTaskEventsOut(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		read  = map[string][]bus.EventKind{}
		asked = map[string]int{}
	)
	e := startApplyEngine(t, func(c *Config) {
		c.EventsRead = func(root string) []bus.EventKind {
			mu.Lock()
			defer mu.Unlock()
			asked[root]++
			return read[root]
		}
	})
	out := t.TempDir()
	files := map[string]string{
		"site.yaml": "resources:\n  - file:\n      - " + out + "/a.txt: {content: a}\n      - " + out + "/b.txt: {content: b}\n" +
			"  - apply:\n      - sub/m.yaml: {}\n",
		"sub/m.yaml": "resources:\n  - file:\n      - " + out + "/c.txt: {content: c}\n",
	}
	name, err := e.bus.PutBundle(t.Context(), applyArchive(t, files))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		read                 []bus.EventKind
		dispatched, finished bool
	}{
		{nil, true, true},
		{[]bus.EventKind{bus.EventTaskFinished, bus.EventRunRejected, bus.EventRunFinished}, false, true},
		{[]bus.EventKind{bus.EventRunRejected, bus.EventRunFinished}, false, false},
		{[]bus.EventKind{bus.EventTaskDispatched, bus.EventTaskFinished, bus.EventRunFinished}, true, true},
	} {
		for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
			os.Remove(filepath.Join(out, f))
		}
		id := NewRunID()
		mu.Lock()
		read[id] = c.read
		mu.Unlock()
		rep, events := e.run(t, bus.RunRequest{RunID: id, Bundle: name, Entry: "site.yaml", ManifestName: "site.yaml"})
		if rep.Status != RunSucceeded || rep.Counts != (Counts{Total: 3, Changed: 3}) || len(rep.Resources) != 3 {
			t.Fatalf("read %v: want succeeded with 3 changed, got %+v", c.read, rep)
		}
		child := childRunID(id, 2, 1)
		count := map[string]map[bus.EventKind]int{id: {}, child: {}}
		for _, ev := range events {
			if count[ev.RunID] == nil {
				t.Fatalf("read %v: event of an unknown run: %+v", c.read, ev)
			}
			count[ev.RunID][ev.Kind]++
		}
		for run, n := range map[string]int{id: 3, child: 1} { // resources with task events
			want := func(published bool) int {
				if published {
					return n
				}
				return 0
			}
			if got := count[run]; got[bus.EventTaskDispatched] != want(c.dispatched) || got[bus.EventTaskFinished] != want(c.finished) ||
				got[bus.EventRunStarted] != 1 || got[bus.EventRunFinished] != 1 {
				t.Errorf("read %v: run %s's events %v; want %d task_dispatched, %d task_finished, one run_started and run_finished",
					c.read, run, got, want(c.dispatched), want(c.finished))
			}
		}
		mu.Lock()
		if asked[id] != 2 {
			t.Errorf("read %v: EventsRead asked %d times of the tree; want once per run (2)", c.read, asked[id])
		}
		mu.Unlock()
	}
}

package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// applyEngine is a real embedded JetStream with a real coordinator and a
// real worker (builtin registry) whose bundle cache is private: tasks carry
// no work directory, so the worker extracts bundles as a remote one does.
type applyEngine struct {
	bus *bus.Bus
}

func startApplyEngine(tb testing.TB, mod ...func(*Config)) *applyEngine {
	tb.Helper()
	_, b := bustest.Start(tb, bus.Config{})
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	cfg := Config{Bus: b, Logger: logger, Name: "apply-test"}
	for _, f := range mod {
		f(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Stop)
	w, err := worker.New(worker.Config{Bus: b, Registry: builtin.Registry(), Name: "apply-test", Logger: logger,
		Concurrency: 2, CacheDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(w.Kill)
	return &applyEngine{bus: b}
}

// archive builds a bundle archive of files (slash paths → content).
func applyArchive(tb testing.TB, files map[string]string) []byte {
	tb.Helper()
	b := bundle.New()
	for name, content := range files {
		if err := b.Add(name, []byte(content)); err != nil {
			tb.Fatal(err)
		}
	}
	data, err := b.Archive()
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// run submits req and follows the run tree's events until the root run
// finished; it returns the report and every event of the tree.
func (e *applyEngine) run(tb testing.TB, req bus.RunRequest) (*Report, []bus.Event) {
	tb.Helper()
	if req.RunID == "" {
		req.RunID = NewRunID()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	followed := make(chan error, 1)
	var events []bus.Event
	go func() {
		followed <- e.bus.FollowEvents(ctx, req.RunID, func(ev bus.Event) bool {
			events = append(events, ev)
			return ev.Kind != bus.EventRunFinished || ev.RunID != req.RunID
		})
	}()
	if err := e.bus.SubmitRun(ctx, req, req.RunID); err != nil {
		tb.Fatal(err)
	}
	if err := <-followed; err != nil {
		tb.Fatalf("run %s did not finish: %v; events: %+v", req.RunID, err, events)
	}
	rep, err := GetReport(ctx, e.bus, req.RunID)
	if err != nil {
		tb.Fatal(err)
	}
	return rep, events
}

// TestApplyChildEventsAndRemoteBundle: child runs' events carry
// manifest=<apply resource name> and the child's run ID; a worker without
// a shared work directory extracts the bundle and resolves each level's
// relative file sources against that level's directory; obj://bucket/key
// bundles work like uploaded ones.
func TestApplyChildEventsAndRemoteBundle(t *testing.T) {
	t.Parallel()
	e := startApplyEngine(t)
	out := t.TempDir()
	files := map[string]string{
		"site.yaml": "resources:\n  - file:\n      - " + out + "/root.txt: {source: level.txt}\n" +
			"  - apply:\n      - sub/manifest.yaml: {}\n",
		"level.txt":         "root\n",
		"sub/manifest.yaml": "resources:\n  - file:\n      - " + out + "/sub.txt: {source: level.txt}\n  - {type: apply, name: lib/m.yaml}\n",
		"sub/level.txt":     "sub\n",
		"sub/lib/m.yaml":    "resources:\n  - file:\n      - " + out + "/lib.txt: {source: level.txt}\n",
		"sub/lib/level.txt": "lib\n",
	}
	archive := applyArchive(t, files)
	name, err := e.bus.PutBundle(t.Context(), archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.bus.PutObject(t.Context(), "sites", "site/v1.tar.gz", archive); err != nil {
		t.Fatal(err)
	}

	for _, ref := range []string{name, "obj://sites/site/v1.tar.gz"} {
		for _, f := range []string{"root.txt", "sub.txt", "lib.txt"} {
			os.Remove(filepath.Join(out, f))
		}
		rep, events := e.run(t, bus.RunRequest{Bundle: ref, Entry: "site.yaml", ManifestName: "site.yaml"})
		if rep.Status != RunSucceeded || rep.Counts != (Counts{Total: 2, Changed: 2}) {
			t.Fatalf("%s: want succeeded with 2 changed, got %+v", ref, rep)
		}
		for f, want := range map[string]string{"root.txt": "root\n", "sub.txt": "sub\n", "lib.txt": "lib\n"} {
			if got, err := os.ReadFile(filepath.Join(out, f)); err != nil || string(got) != want {
				t.Errorf("%s: %s = %q, %v; want %q", ref, f, got, err, want)
			}
		}
		sub := childRunID(rep.RunID, 1, 1)
		lib := childRunID(sub, 1, 1)
		wantManifest := map[string]string{rep.RunID: "site.yaml", sub: "sub/manifest.yaml", lib: "lib/m.yaml"}
		finished := map[string]int{}
		for _, ev := range events {
			want, ok := wantManifest[ev.RunID]
			if !ok {
				t.Errorf("%s: event of an unknown run %s: %+v", ref, ev.RunID, ev)
				continue
			}
			if ev.Manifest != want || ev.RootRunID != rep.RunID {
				t.Errorf("%s: %s event of run %s: manifest %q, root %q; want %q, %q", ref, ev.Kind, ev.RunID, ev.Manifest, ev.RootRunID, want, rep.RunID)
			}
			if ev.Kind == bus.EventTaskFinished {
				finished[ev.RunID]++
			}
		}
		if finished[rep.RunID] != 2 || finished[sub] != 2 || finished[lib] != 1 {
			t.Errorf("%s: task_finished events per run: %v, want 2, 2 and 1", ref, finished)
		}
	}
}

// TestApplyRunRequestMaxDepth: the request's max_depth limits the tree
// (the coordinator's default is 10).
func TestApplyRunRequestMaxDepth(t *testing.T) {
	t.Parallel()
	e := startApplyEngine(t)
	name, err := e.bus.PutBundle(t.Context(), applyArchive(t, map[string]string{
		"manifest.yaml": "resources:\n  - apply:\n      - manifest.yaml: {}\n",
	}))
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := e.run(t, bus.RunRequest{Bundle: name, MaxDepth: 1})
	c := rep.Resources[0].Child
	if c == nil || c.Depth != 1 || c.Resources[0].Child != nil {
		t.Fatalf("want one child at depth 1 that started none, got %+v", rep)
	}
	if got := c.Resources[0].Error; !strings.Contains(got, "depth 2 is over the limit of 1: manifest.yaml → manifest.yaml → manifest.yaml") {
		t.Errorf("depth error: %q", got)
	}
}

// BenchmarkApplyLevel measures one run whose only resource is a stable file
// (inline), against one whose only resource is an apply of a child manifest
// holding that file (child): the difference is the overhead of an apply
// level (child run record, plan, outcome consumer, events, report).
func BenchmarkApplyLevel(b *testing.B) {
	e := startApplyEngine(b)
	path := filepath.Join(b.TempDir(), "stable.txt")
	file := "resources:\n  - file:\n      - " + path + ": {content: stable}\n"
	for _, bm := range []struct {
		name  string
		files map[string]string
	}{
		{"inline", map[string]string{"manifest.yaml": file}},
		{"child", map[string]string{"manifest.yaml": "resources:\n  - apply:\n      - child/manifest.yaml: {}\n", "child/manifest.yaml": file}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			ref, err := e.bus.PutBundle(context.Background(), applyArchive(b, bm.files))
			if err != nil {
				b.Fatal(err)
			}
			req := bus.RunRequest{Bundle: ref}
			e.run(b, req) // the file exists from here on: every run is stable
			b.ResetTimer()
			for b.Loop() {
				rep, _ := e.run(b, req)
				if rep.Status != RunSucceeded || rep.Counts.Stable != 1 {
					b.Fatalf("want one stable resource, got %+v", rep)
				}
			}
		})
	}
}

// TestApplyLargeSessionStoredApart: a parent of many resources hands its
// children a session too large for a run header: it is stored apart
// (session_ref), the child's header stays small, and references to the
// parent's resources still work, from the child and from a grandchild
// (require of a root resource, subscribe refreshing on a change).
func TestApplyLargeSessionStoredApart(t *testing.T) {
	t.Parallel()
	e := startApplyEngine(t)
	out := t.TempDir()
	const n = 600
	var root strings.Builder
	root.WriteString("resources:\n  - exec:\n")
	for i := range n {
		fmt.Fprintf(&root, "      - r%03d: {command: /bin/true, creates: /}\n", i)
	}
	root.WriteString("  - {type: file, name: " + out + "/changed.txt, content: x}\n")
	root.WriteString("  - {type: apply, name: child/manifest.yaml, require: [file#" + out + "/changed.txt]}\n")
	files := map[string]string{
		"manifest.yaml": root.String(),
		"child/manifest.yaml": "resources:\n" +
			"  - {type: exec, name: child-refresh, command: \"/bin/sh -c 'echo x >> " + out + "/refreshed'\", refreshonly: true, subscribe: [file#" + out + "/changed.txt]}\n" +
			"  - {type: apply, name: grand/manifest.yaml}\n",
		"child/grand/manifest.yaml": "resources:\n" +
			"  - {type: exec, name: grand-one, command: \"/bin/sh -c 'echo x >> " + out + "/grand'\", require: [exec#r599]}\n",
	}
	ref, err := e.bus.PutBundle(t.Context(), applyArchive(t, files))
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := e.run(t, bus.RunRequest{Bundle: ref})
	if rep.Status != RunSucceeded || rep.Counts != (Counts{Total: n + 2, Stable: n, Changed: 2}) {
		t.Fatalf("want succeeded, %d stable and 2 changed, got %+v", n, rep.Counts)
	}
	for _, f := range []string{"refreshed", "grand"} {
		if got, err := os.ReadFile(filepath.Join(out, f)); err != nil || string(got) != "x\n" {
			t.Errorf("%s = %q, %v; want one line", f, got, err)
		}
	}
	child := childRunID(rep.RunID, n+1, 1)
	entry, err := e.bus.Runs().Get(t.Context(), runKey(child))
	if err != nil {
		t.Fatal(err)
	}
	var rec record
	if err := json.Unmarshal(entry.Value, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.SessionRef == "" || rec.Session != nil || len(entry.Value) > 8<<10 {
		t.Fatalf("child header of %d bytes, session_ref %q, %d inline session entries: want the session stored apart",
			len(entry.Value), rec.SessionRef, len(rec.Session))
	}
}

// TestGraphRunSharedAmongWorkerSlots: the ready resources of a graph run
// go out in segments, twice as many as the pool's worker slots (one
// worker of concurrency 2 here: 4); the spread is kept in the header.
func TestGraphRunSharedAmongWorkerSlots(t *testing.T) {
	t.Parallel()
	e := startApplyEngine(t)
	const n = 200
	var m strings.Builder
	m.WriteString("ordering: graph\nresources:\n")
	for i := range n {
		fmt.Fprintf(&m, "  - {type: exec, name: r%03d, command: /bin/true, creates: /}\n", i)
	}
	ref, err := e.bus.PutBundle(t.Context(), applyArchive(t, map[string]string{"manifest.yaml": m.String()}))
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := e.run(t, bus.RunRequest{Bundle: ref})
	if rep.Status != RunSucceeded || rep.Counts.Stable != n {
		t.Fatalf("want %d stable, got %+v", n, rep.Counts)
	}
	entry, err := e.bus.Runs().Get(t.Context(), runKey(rep.RunID))
	if err != nil {
		t.Fatal(err)
	}
	var rec record
	if err := json.Unmarshal(entry.Value, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Spread != 4 {
		t.Errorf("spread %d, want 4 (twice one worker's 2 slots)", rec.Spread)
	}
	js, err := jetstream.New(e.bus.Conn())
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(t.Context(), bus.StreamTasks)
	if err != nil {
		t.Fatal(err)
	}
	if published := st.CachedInfo().State.LastSeq; published != 4 {
		t.Errorf("%d task messages for %d ready resources, want 4 segments of 50", published, n)
	}
}

// TestUnsignedRuns: a coordinator configured Unsigned (the embedded
// engine's) starts runs, children included, with no secret: its tasks
// carry no token and its runs' outcomes no MAC, and the runs succeed as
// signed ones do. The same tree on a signed coordinator is signed
// throughout. An unsigned coordinator takes a run request's fields as
// they are (no strict second decode); a signed one refuses unknown ones.
func TestUnsignedRuns(t *testing.T) {
	t.Parallel()
	for _, unsigned := range []bool{true, false} {
		e := startApplyEngine(t, func(c *Config) { c.Unsigned = unsigned })
		// What the bus carries: every task and every fact of a history.
		var (
			mu   sync.Mutex
			seen = map[string][]string{}
		)
		for _, subject := range []string{bus.SubjectTasksAll, bus.SubjectOutcomesAll} {
			sub, err := e.bus.Conn().Subscribe(subject, func(m *nats.Msg) {
				mu.Lock()
				defer mu.Unlock()
				seen[subject] = append(seen[subject], string(m.Data))
			})
			require.NoError(t, err)
			t.Cleanup(func() { _ = sub.Unsubscribe() })
		}
		require.NoError(t, e.bus.Conn().Flush())
		out := t.TempDir()
		archive := applyArchive(t, map[string]string{
			"site.yaml": "resources:\n  - file:\n      - " + out + "/a.txt: {content: a}\n      - " + out + "/b.txt: {content: b}\n" +
				"  - apply:\n      - sub.yaml: {}\n",
			"sub.yaml": "resources:\n  - file:\n      - " + out + "/c.txt: {content: c}\n",
		})
		ctx := context.Background()
		name, err := e.bus.PutBundle(ctx, archive)
		require.NoError(t, err)
		rep, _ := e.run(t, bus.RunRequest{Bundle: name, Entry: "site.yaml"})
		require.Equal(t, RunSucceeded, rep.Status, "unsigned=%v: %+v", unsigned, rep)
		for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
			require.FileExists(t, filepath.Join(out, f))
		}
		var runs []string
		for _, r := range rep.Resources {
			runs = append(runs, r.ChildRunID)
		}
		require.Contains(t, runs, rep.RunID+"-a2", "the apply's child run")
		runs = []string{rep.RunID, rep.RunID + "-a2"}
		for _, id := range runs {
			rec, _, err := loadRecord(ctx, e.bus.Runs(), id)
			require.NoError(t, err)
			require.Equal(t, unsigned, len(rec.Secret) == 0, "run %s: secret %x", id, rec.Secret)
		}
		require.NoError(t, e.bus.Conn().Flush())
		mu.Lock()
		for subject, field := range map[string]string{bus.SubjectTasksAll: `"token":`, bus.SubjectOutcomesAll: `"mac":`} {
			msgs := seen[subject]
			require.NotEmpty(t, msgs, subject)
			signed := 0
			for _, m := range msgs {
				if strings.Contains(m, field) {
					signed++
				}
			}
			if unsigned {
				require.Zero(t, signed, "%s: %d of %d messages signed: %q", subject, signed, len(msgs), msgs)
			} else {
				require.NotZero(t, signed, "%s: none of %d messages signed", subject, len(msgs))
			}
		}
		mu.Unlock()

		// A run request with a field this build does not know: refused
		// by a signed coordinator (TestRequestsDecodedStrictly), taken as
		// it is by an unsigned one, on whose bus no one else publishes
		// (its requests are its own binary's encoding).
		id := fmt.Sprintf("extra-field-%v", unsigned)
		_, err = e.bus.Conn().Request(bus.SubjectRunSubmit, []byte(`{"v": 1, "run_id": "`+id+`", "manifest_yaml": "resources: []\n", "nooop": true}`), 10*time.Second)
		require.NoError(t, err)
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var finished bus.Event
		require.NoError(t, e.bus.FollowEvents(fctx, id, func(ev bus.Event) bool {
			if ev.Kind == bus.EventRunFinished {
				finished = ev
				return false
			}
			return true
		}))
		cancel()
		if unsigned {
			require.Equal(t, "succeeded", finished.Status, "unsigned: %+v", finished)
		} else {
			require.Equal(t, "failed", finished.Status, "signed: %+v", finished)
			require.Contains(t, finished.Error, `unknown field "nooop"`)
		}
	}
}

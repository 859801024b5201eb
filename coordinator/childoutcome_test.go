package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/worker"
)

// flakyChildOutcomes makes the publication of child outcomes fail while
// down is set (a server that does not acknowledge in time), counting the
// tries, and retries quickly. Not parallel: it swaps package variables.
type flakyChildOutcomes struct {
	tries atomic.Int64
	down  atomic.Bool
}

func failChildOutcomes(t *testing.T, retry, within time.Duration) *flakyChildOutcomes {
	f := &flakyChildOutcomes{}
	f.down.Store(true)
	publish, r, rmax, rfor := publishChildOutcome, childOutcomeRetry, childOutcomeMaxRetry, childOutcomeFor
	t.Cleanup(func() {
		publishChildOutcome, childOutcomeRetry, childOutcomeMaxRetry, childOutcomeFor = publish, r, rmax, rfor
	})
	childOutcomeRetry, childOutcomeMaxRetry, childOutcomeFor = retry, retry, within
	publishChildOutcome = func(ctx context.Context, b *bus.Bus, o bus.Outcome, msgID string) error {
		f.tries.Add(1)
		if f.down.Load() {
			return errors.New("bus: publish: context deadline exceeded")
		}
		return publish(ctx, b, o, msgID)
	}
	return f
}

// startChildOutcomeEngine is a real embedded JetStream, a coordinator
// scanning for runs to recover every scan, and a worker.
func startChildOutcomeEngine(t *testing.T, scan time.Duration) *applyEngine {
	_, b := bustest.Start(t, bus.Config{})
	logger := slog.New(slog.DiscardHandler)
	c, err := New(Config{Bus: b, Logger: logger, Name: "outcome-test", ScanInterval: scan})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	w, err := worker.New(worker.Config{Bus: b, Registry: builtin.Registry(), Name: "outcome-test", Logger: logger,
		Concurrency: 2, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Kill)
	return &applyEngine{bus: b}
}

func childTreeRequest(t *testing.T, e *applyEngine, out string) bus.RunRequest {
	archive := applyArchive(t, map[string]string{
		"site.yaml":  "resources:\n  - apply:\n      - child.yaml: {}\n",
		"child.yaml": "resources:\n  - file:\n      - " + out + "/child.txt: {content: \"child\\n\"}\n",
	})
	name, err := e.bus.PutBundle(t.Context(), archive)
	if err != nil {
		t.Fatal(err)
	}
	return bus.RunRequest{RunID: NewRunID(), Bundle: name, Entry: "site.yaml", ManifestName: "site.yaml"}
}

// TestChildOutcomePublishedAgain: a child's outcome the server did not
// acknowledge is published again; the parent ends with the child's
// result, not waiting for its task deadline.
func TestChildOutcomePublishedAgain(t *testing.T) {
	f := failChildOutcomes(t, 10*time.Millisecond, time.Minute)
	var failures atomic.Int64
	publish := publishChildOutcome
	publishChildOutcome = func(ctx context.Context, b *bus.Bus, o bus.Outcome, msgID string) error {
		if failures.Add(1) <= 3 {
			return errors.New("bus: publish: context deadline exceeded")
		}
		return publish(ctx, b, o, msgID)
	}
	f.down.Store(false)
	e := startChildOutcomeEngine(t, time.Hour) // no recovery scan: the retry alone delivers
	out := t.TempDir()
	rep, _ := e.run(t, childTreeRequest(t, e, out))
	if rep.Status != RunSucceeded || rep.Counts != (Counts{Total: 1, Changed: 1}) {
		t.Fatalf("want the parent succeeded with its apply changed, got %+v", rep)
	}
	if n := failures.Load(); n != 4 {
		t.Errorf("publications of the child outcome: %d, want 3 failed and 1 delivered", n)
	}
	if got, err := os.ReadFile(filepath.Join(out, "child.txt")); err != nil || string(got) != "child\n" {
		t.Errorf("child.txt = %q, %v", got, err)
	}
}

// TestChildOutcomeDeliveredByRecovery: when the child's coordinator gives
// up publishing its outcome, the ended child keeps its active mark and the
// recovery scan delivers the outcome once the server takes it again; the
// mark is removed then.
func TestChildOutcomeDeliveredByRecovery(t *testing.T) {
	f := failChildOutcomes(t, 5*time.Millisecond, 20*time.Millisecond)
	e := startChildOutcomeEngine(t, 20*time.Millisecond)
	out := t.TempDir()
	req := childTreeRequest(t, e, out)
	child := childRunID(req.RunID, 0, 1)

	done := make(chan *Report, 1)
	go func() {
		rep, _ := e.run(t, req)
		done <- rep
	}()
	// The child ends, its outcome is refused, and recovery scans try it
	// again (more tries than the in-process budget of 20 ms allows).
	deadline := time.Now().Add(15 * time.Second)
	for {
		rec, _, err := loadRecord(t.Context(), e.bus.Runs(), child)
		if err == nil && rec.Status.Final() && f.tries.Load() >= 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child run %s not ended with its outcome refused repeatedly: record %+v, %v; tries %d", child, rec, err, f.tries.Load())
		}
		time.Sleep(10 * time.Millisecond) // polling the runs bucket, bounded by the deadline
	}
	if _, err := e.bus.Runs().Get(t.Context(), activeKey(child)); err != nil {
		t.Fatalf("an ended child whose outcome is owed keeps its active mark: %v", err)
	}
	f.down.Store(false)
	select {
	case rep := <-done:
		if rep.Status != RunSucceeded || rep.Counts != (Counts{Total: 1, Changed: 1}) {
			t.Fatalf("want the parent succeeded with its apply changed, got %+v", rep)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the parent did not end after the server took outcomes again")
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, err := e.bus.Runs().Get(t.Context(), activeKey(child))
		if errors.Is(err, bus.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child's active mark stays after its outcome was delivered: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

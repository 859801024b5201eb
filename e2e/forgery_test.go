package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bundle"
)

// roleConnect connects to the cluster's server with the nkey `manifold
// server` generated for role (worker, submitter, ...).
func (c *distCluster) roleConnect(t *testing.T, role string) *nats.Conn {
	t.Helper()
	nkey, err := nats.NkeyOptionFromSeed(filepath.Join(os.Getenv("MANIFOLD_CREDENTIALS"), role+".nk"))
	if err != nil {
		t.Fatal(err)
	}
	opts := []nats.Option{nkey, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}
	if role == "worker" {
		opts = append(opts, nats.CustomInboxPrefix(bus.WorkerInboxPrefix)) // the only replies a worker may read
	}
	nc, err := nats.Connect(c.url, opts...)
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// submit starts a run with the API and returns its ID.
func (c *distCluster) submit(t *testing.T, req map[string]any) string {
	t.Helper()
	var sub struct {
		RunID string `json:"run_id"`
		Error any    `json:"error"`
	}
	if raw := c.request(t, "manifold.api.runs.submit", req, &sub); sub.RunID == "" || sub.Error != nil {
		t.Fatalf("runs.submit: %s", raw)
	}
	return sub.RunID
}

// forgeryManifest is a failing exec (once the file go exists; it writes
// started when it runs) and a refresh-only exec subscribed to it, which
// writes fired if it ever runs.
func forgeryManifest(dir string) string {
	return `ordering: graph
resources:
  - exec:
      - victim:
          command: "touch ` + dir + `/started; while [ ! -e ` + dir + `/go ]; do sleep 0.02; done; exit 1"
          provider: shell
  - exec:
      - notify:
          command: "touch ` + dir + `/fired"
          provider: shell
          refreshonly: true
          subscribe: ["exec#victim"]
`
}

// A worker's NATS identity can publish on any run's outcome subject and
// write any result record: the coordinator must still apply only what the
// worker the task was delivered to signed. Forged outcomes (unsigned, or
// with a made-up mac), a forged cancellation and a forged result record
// replayed on a redelivery are all refused: the failing exec fails the
// run and its refresh-only subscriber never runs.
func TestForgedOutcomesRefused(t *testing.T) {
	c := distStart(t, "w1")
	hostile := c.roleConnect(t, "worker")
	js, err := jetstream.New(hostile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	t.Run("forged outcomes on the run's subject", func(t *testing.T) {
		dir := t.TempDir()
		runID := "forged-outcome"
		c.submit(t, map[string]any{"run_id": runID, "manifest_yaml": forgeryManifest(dir), "manifest_name": "site.yaml"})
		distEventually(t, 30*time.Second, "the victim exec runs", func() (bool, string) { return exists(filepath.Join(dir, "started")), "" })
		forged := []map[string]any{
			{"v": 1, "run_id": runID, "task": 0, "attempt": 1, "ref": "exec#victim", "status": "changed", "changed": true,
				"worker": "w1", "delivery": 1, "duration_ms": 5},
			{"v": 1, "run_id": runID, "task": 0, "attempt": 1, "ref": "exec#victim", "status": "changed", "changed": true,
				"worker": "w1", "delivery": 1, "duration_ms": 5, "mac": strings.Repeat("ab", 32)},
			{"v": 1, "run_id": runID, "kind": "cancel"},
		}
		for _, o := range forged {
			data, _ := json.Marshal(o)
			if _, err := js.Publish(ctx, bus.OutcomeSubject(runID), data); err != nil {
				t.Fatalf("a worker may publish outcomes: %v", err)
			}
		}
		distEventually(t, 20*time.Second, "the coordinator refuses the three forgeries (or the run ends)", func() (bool, string) {
			if strings.Count(c.coord.Stderr(), "history entry refused") >= 3 || exists(filepath.Join(dir, "fired")) {
				return true, ""
			}
			var rep distReport
			raw := c.request(t, "manifold.api.runs.get", map[string]string{"run_id": runID}, &rep)
			return rep.Status == "succeeded" || rep.Status == "cancelled", raw
		})
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		rep := c.waitFinal(t, runID, 30*time.Second)
		if rep.Status != "failed" {
			t.Errorf("run %s: status %s, want failed: a forged outcome or cancellation was applied", runID, rep.Status)
		}
		if v := rep.resource(t, "exec#victim"); v.Status != "failed" || v.Worker != "w1" {
			t.Errorf("exec#victim: %+v, want failed on w1", v)
		}
		if exists(filepath.Join(dir, "fired")) {
			t.Errorf("the refresh-only subscriber ran: the forged changed outcome was applied")
		}
		for _, reason := range []string{"unsigned", "invalid mac"} {
			if !strings.Contains(c.coord.Stderr(), "history entry refused: "+reason) {
				t.Errorf("coordinator log: no refusal %q", reason)
			}
		}
	})

	t.Run("forged result record replayed on a redelivery", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		runID := "forged-record"
		// The record a redelivery of task 0 would be answered from,
		// written before the run starts.
		record, _ := json.Marshal(map[string]any{"v": 1, "run_id": runID, "task": 0, "attempt": 1, "ref": "exec#victim",
			"status": "changed", "changed": true, "worker": "w2", "delivery": 1, "mac": strings.Repeat("cd", 32)})
		if _, err := js.Publish(ctx, "$KV."+bus.BucketResults+"."+runID+".0.1", record); err != nil {
			t.Fatalf("a worker may write result records: %v", err)
		}
		c.submit(t, map[string]any{"run_id": runID, "manifest_yaml": forgeryManifest(dir), "manifest_name": "site.yaml", "pool": "p2"})
		// The hostile worker takes the task from pool p2 (no other worker
		// has it) and gives it back: its redelivery goes to w2, which
		// looks the record up.
		hb, err := bus.Attach(ctx, hostile, bus.Config{})
		if err != nil {
			t.Fatal(err)
		}
		cons, err := hb.TaskConsumer(ctx, "p2")
		if err != nil {
			t.Fatal(err)
		}
		d, err := cons.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Nak(0); err != nil {
			t.Fatal(err)
		}
		w2 := c.startWorker(t, "w2", "p2")
		rep := c.waitFinal(t, runID, 30*time.Second)
		if rep.Status != "failed" {
			t.Errorf("run %s: status %s, want failed: the forged result record was accepted", runID, rep.Status)
		}
		if exists(filepath.Join(dir, "fired")) {
			t.Errorf("the refresh-only subscriber ran: the forged record was accepted")
		}
		if !exists(filepath.Join(dir, "started")) {
			t.Errorf("the victim exec was answered from the forged record instead of run")
		}
		if !strings.Contains(w2.Stderr(), "recorded outcome ignored") {
			t.Errorf("worker w2 did not say it ignored the forged record:\n%s", w2.Stderr())
		}
	})
}

// A submitter places a tarball of its own under the digest name of a
// victim's bundle (`nats obj put` with the submitter's key; the name is
// predictable from the victim's files): a run naming the bundle is refused
// with a digest mismatch, and the victim's unchanged `manifold run`
// uploads its bundle again instead of skipping it; the attacker's exec
// never runs.
func TestBundleSwappedUnderItsNameRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	m := writeFile(t, dir, "site.yaml", "resources:\n  - {type: file, name: \""+dir+"/real.txt\", content: \"real\\n\", ensure: present}\n")

	// The name the victim's bundle gets, learnt on another deployment.
	probe := distStart(t, "p1")
	wantCode(t, probe.run(t, "run", "--output", "json", m), 0)
	admin, err := jetstream.New(probe.nc)
	if err != nil {
		t.Fatal(err)
	}
	bundles, err := admin.ObjectStore(ctx, bus.BucketBundles)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := bundles.List(ctx)
	if err != nil || len(infos) != 1 || !strings.HasPrefix(infos[0].Name, "sha256-") {
		t.Fatalf("bundles store: %v %+v", err, infos)
	}
	name := infos[0].Name
	if err := os.Remove(filepath.Join(dir, "real.txt")); err != nil {
		t.Fatal(err)
	}

	c := distStart(t, "w1")
	evil := bundle.New()
	for _, entry := range []string{"site.yaml", "manifest.yaml"} {
		if err := evil.Add(entry, []byte("resources:\n  - {type: exec, name: pwn, command: \"touch "+dir+"/pwned\"}\n")); err != nil {
			t.Fatal(err)
		}
	}
	archive, err := evil.Archive()
	if err != nil {
		t.Fatal(err)
	}
	sjs, err := jetstream.New(c.roleConnect(t, "submitter"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := sjs.ObjectStore(ctx, bus.BucketBundles)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutBytes(ctx, name, archive); err != nil {
		t.Fatalf("a submitter may upload bundles: %v", err)
	}

	// A run naming the bundle: refused (at submission, or when its
	// coordinator reads the bundle), naming it.
	var sub struct {
		RunID string `json:"run_id"`
	}
	raw := c.request(t, "manifold.api.runs.submit", map[string]any{"bundle": name, "entry": "site.yaml", "manifest_name": "site.yaml"}, &sub)
	if sub.RunID != "" {
		distEventually(t, 30*time.Second, "the run naming the swapped bundle ends", func() (bool, string) {
			var rep distReport
			raw = c.request(t, "manifold.api.runs.get", map[string]string{"run_id": sub.RunID}, &rep)
			return rep.Status == "failed" || rep.Status == "succeeded", raw
		})
	}
	if !strings.Contains(raw, "does not match its digest name") || !strings.Contains(raw, name) {
		t.Errorf("run of the swapped bundle: want a digest mismatch naming %s:\n%s", name, raw)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatalf("the attacker's exec ran")
	}

	// The victim's unchanged command: the bundle is uploaded again.
	r := c.run(t, "run", "--output", "json", m)
	wantCode(t, r, 0)
	if rep := decodeReport(t, r); rep.Status != "succeeded" || rep.resource(t, "file#"+dir+"/real.txt").Status != "changed" {
		t.Errorf("victim's run: %+v", rep)
	}
	if strings.Contains(r.stderr, "iolation") {
		t.Errorf("the re-upload needed a permission the submitter lacks:\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatalf("the attacker's exec ran")
	}
	wantFile(t, filepath.Join(dir, "real.txt"), "real\n", 0o644)
}

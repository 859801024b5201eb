package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestDistributed runs manifold as separate processes: `manifold server`,
// `manifold coordinator` and two `manifold worker`s, then drives them with
// the CLI and with plain NATS requests to the micro service.
func TestDistributed(t *testing.T) {
	c := distStart(t, "w1", "w2")

	t.Run("workers", func(t *testing.T) {
		t.Parallel()
		ws := c.waitWorkers(t, func(names []string) bool {
			return slices.Contains(names, "w1") && slices.Contains(names, "w2")
		})
		for _, w := range ws {
			if w.Name == "w1" && (!slices.Equal(w.Pools, []string{"default"}) || w.Concurrency != 2 || w.Version == "") {
				t.Errorf("w1 registered as %+v", w)
			}
		}
		r := c.run(t, "workers")
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "w1") || !strings.Contains(r.stdout, "w2") || !strings.Contains(r.stdout, "POOLS") {
			t.Errorf("workers table:\n%s", r)
		}
	})

	t.Run("run follow and json then status and runs", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		m := writeFile(t, dir, "site.yaml", `ordering: graph
resources:
  - {type: file, name: "`+dir+`/a.txt", content: "a\n", ensure: present}
  - {type: file, name: "`+dir+`/b.txt", content: "b\n", ensure: present}
  - {type: exec, name: hello, command: "/bin/echo hello"}
  - {type: exec, name: world, command: "/bin/echo world"}
`)
		r := c.run(t, "run", "--follow", m)
		wantCode(t, r, 0)
		for _, want := range []string{"submitted", "changed", "exec#hello", "file#" + dir + "/a.txt", "succeeded"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("run --follow: want %q in:\n%s", want, r)
			}
		}
		wantFile(t, filepath.Join(dir, "a.txt"), "a\n", 0o644)

		r = c.run(t, "run", "--output", "json", m)
		wantCode(t, r, 0)
		rep := decodeReport(t, r)
		if rep.Status != "succeeded" || rep.Counts.Total != 4 || rep.Counts.Failed != 0 {
			t.Fatalf("report: %+v", rep)
		}
		if rep.resource(t, "file#"+dir+"/a.txt").Status != "stable" {
			t.Errorf("second run: want file stable: %+v", rep.Resources)
		}
		for _, res := range rep.Resources {
			if res.Worker != "w1" && res.Worker != "w2" {
				t.Errorf("%s ran on %q, want w1 or w2", res.Ref, res.Worker)
			}
		}

		r = c.run(t, "status", rep.RunID)
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "succeeded") || !strings.Contains(r.stdout, "exec#world") {
			t.Errorf("status:\n%s", r)
		}
		r = c.run(t, "status", "--output", "json", rep.RunID)
		wantCode(t, r, 0)
		if got := decodeReport(t, r); got.RunID != rep.RunID || got.Status != "succeeded" {
			t.Errorf("status --output json: %+v", got)
		}
		wantCode(t, c.run(t, "status", "no-such-run"), 2)

		r = c.run(t, "runs", "--output", "json", "--limit", "50")
		wantCode(t, r, 0)
		var list struct {
			Runs []struct {
				RunID  string `json:"run_id"`
				Status string `json:"status"`
				Counts counts `json:"counts"`
			} `json:"runs"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
			t.Fatal(err, r)
		}
		found := false
		for _, run := range list.Runs {
			found = found || run.RunID == rep.RunID && run.Status == "succeeded" && run.Counts.Total == 4
		}
		if !found {
			t.Errorf("runs does not list %s:\n%s", rep.RunID, r)
		}
		r = c.run(t, "runs")
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, rep.RunID) {
			t.Errorf("runs:\n%s", r)
		}
	})

	t.Run("apply --server follows like run", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		m := writeFile(t, dir, "site.yaml", "resources:\n  - {type: file, name: \""+dir+"/x\", content: \"x\", ensure: present}\n")
		r := runWith(t, runOpts{}, "apply", "--server", c.url, "--output", "json", m)
		wantCode(t, r, 0)
		if rep := decodeReport(t, r); rep.Status != "succeeded" || rep.Resources[0].Worker == "embedded" {
			t.Errorf("apply --server: %+v", rep)
		}
	})

	t.Run("invalid manifest exits 2 before submitting", func(t *testing.T) {
		t.Parallel()
		m := writeFile(t, t.TempDir(), "bad.yaml", "resources:\n  - {type: file, name: /tmp/x, ensrue: present}\n")
		r := c.run(t, "run", "--follow", m)
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, "bad.yaml:2:") {
			t.Errorf("want a file:line:col error:\n%s", r)
		}
	})

	t.Run("context file", func(t *testing.T) {
		t.Parallel()
		ctxFile := writeFile(t, t.TempDir(), "ctx.json", `{"url": "`+c.url+`"}`)
		r := runWith(t, runOpts{env: []string{"MANIFOLD_SERVER=nats://127.0.0.1:1"}}, "workers", "--context", ctxFile)
		wantCode(t, r, 0)
		home := t.TempDir()
		if err := os.MkdirAll(filepath.Join(home, ".config", "nats", "context"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(home, ".config", "nats", "context"), "site.json", `{"url": "nats://127.0.0.1:1"}`)
		r = runWith(t, runOpts{env: []string{"HOME=" + home, "XDG_CONFIG_HOME="}}, "workers", "--context", "site", "--server", c.url)
		wantCode(t, r, 0) // the flag overrides the context
		r = runWith(t, runOpts{env: []string{"HOME=" + home, "XDG_CONFIG_HOME="}}, "workers", "--context", "site")
		wantCode(t, r, 3)
	})

	t.Run("API", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		manifest := "resources:\n  - {type: file, name: \"" + dir + "/api.txt\", content: \"from the API\\n\", ensure: present}\n"
		var sub struct {
			RunID string `json:"run_id"`
			Error any    `json:"error"`
		}
		raw := c.request(t, "manifold.api.runs.submit", map[string]any{
			"manifest_yaml": manifest, "manifest_name": "site.yaml", "data": map[string]any{}, "noop": false,
			"pool": "default", "idempotency_key": "key-" + dir}, &sub)
		if sub.RunID == "" || sub.Error != nil {
			t.Fatalf("runs.submit: %s", raw)
		}
		rep := c.waitFinal(t, sub.RunID, 30*time.Second)
		if rep.Status != "succeeded" || rep.Manifest != "site.yaml" {
			t.Fatalf("runs.get: %+v", rep)
		}
		wantFile(t, filepath.Join(dir, "api.txt"), "from the API\n", 0o644)

		// The same idempotency key gets the same run, and starts nothing.
		var again struct {
			RunID string `json:"run_id"`
		}
		c.request(t, "manifold.api.runs.submit", map[string]any{"manifest_yaml": manifest, "idempotency_key": "key-" + dir}, &again)
		if again.RunID != sub.RunID {
			t.Errorf("same idempotency key: got run %s, want %s", again.RunID, sub.RunID)
		}

		// An invalid manifest gets a precise error reply.
		var bad struct {
			RunID string `json:"run_id"`
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		raw = c.request(t, "manifold.api.runs.submit", map[string]any{
			"manifest_yaml": "resources:\n  - {type: file, name: /tmp/x, ensrue: present}\n", "manifest_name": "site.yaml"}, &bad)
		if bad.RunID != "" || bad.Error.Code != "invalid" || !strings.Contains(bad.Error.Message, "site.yaml:2:") {
			t.Errorf("invalid manifest: %s", raw)
		}

		var missing struct {
			Error struct{ Code string } `json:"error"`
		}
		c.request(t, "manifold.api.runs.get", map[string]string{"run_id": "no-such-run"}, &missing)
		if missing.Error.Code != "not_found" {
			t.Errorf("runs.get of an unknown run: %+v", missing)
		}

		var valid struct {
			Valid     bool     `json:"valid"`
			Resources int      `json:"resources"`
			Errors    []string `json:"errors"`
		}
		c.request(t, "manifold.api.manifests.validate", map[string]any{"manifest_yaml": manifest}, &valid)
		if !valid.Valid || valid.Resources != 1 {
			t.Errorf("manifests.validate: %+v", valid)
		}
		valid.Valid, valid.Resources = true, 0
		c.request(t, "manifold.api.manifests.validate", map[string]any{"manifest_yaml": "resources:\n  - {type: nope, name: x}\n", "manifest_name": "m.yaml"}, &valid)
		if valid.Valid || len(valid.Errors) == 0 || !strings.Contains(valid.Errors[0], "m.yaml:") {
			t.Errorf("manifests.validate of an invalid manifest: %+v", valid)
		}

		var list struct {
			Runs []struct {
				RunID string `json:"run_id"`
			} `json:"runs"`
		}
		c.request(t, "manifold.api.runs.list", map[string]int{"limit": 1000}, &list)
		if !slices.ContainsFunc(list.Runs, func(r struct {
			RunID string `json:"run_id"`
		}) bool {
			return r.RunID == sub.RunID
		}) {
			t.Errorf("runs.list does not hold %s: %+v", sub.RunID, list)
		}
	})

	t.Run("fire and forget rejected request and poison", func(t *testing.T) {
		t.Parallel()
		// Events of the invalid run, seen on core NATS as they are stored.
		events := make(chan *nats.Msg, 16)
		s, err := c.nc.ChanSubscribe("manifold.events.ff-invalid-1.>", events)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Unsubscribe()
		if err := c.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		// A poison message first: it must not block what follows.
		if err := c.nc.Publish("manifold.runs.submit", []byte("this is not JSON")); err != nil {
			t.Fatal(err)
		}
		invalid, _ := json.Marshal(map[string]any{"run_id": "ff-invalid-1", "manifest_name": "ff.yaml",
			"manifest_yaml": "resources:\n  - {type: file, name: /tmp/x, ensrue: present}\n"})
		if err := c.nc.Publish("manifold.runs.submit", invalid); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		good, _ := json.Marshal(map[string]any{"run_id": "ff-good-1", "manifest_name": "ff.yaml",
			"manifest_yaml": "resources:\n  - {type: file, name: \"" + dir + "/ff\", content: ff, ensure: present}\n"})
		if err := c.nc.Publish("manifold.runs.submit", good); err != nil {
			t.Fatal(err)
		}

		deadline := time.After(30 * time.Second)
		var kinds []string
		for !slices.Contains(kinds, "run_rejected") {
			select {
			case m := <-events:
				var ev struct {
					Kind, Error string
				}
				_ = json.Unmarshal(m.Data, &ev)
				kinds = append(kinds, ev.Kind)
				if ev.Kind == "run_rejected" && !strings.Contains(ev.Error, "ff.yaml:2:") {
					t.Errorf("run_rejected event without a precise error: %s", m.Data)
				}
			case <-deadline:
				t.Fatalf("no run_rejected event; got %v", kinds)
			}
		}
		rep := c.waitFinal(t, "ff-invalid-1", 30*time.Second)
		if rep.Status != "failed" {
			t.Errorf("rejected run record: %+v", rep)
		}
		if rep := c.waitFinal(t, "ff-good-1", 30*time.Second); rep.Status != "succeeded" {
			t.Errorf("the run after the poison message: %+v", rep)
		}
	})

	t.Run("pool without workers times out while the rest finish", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		m := writeFile(t, dir, "pools.yaml", `ordering: graph
resources:
  - {type: exec, name: stuck, command: "/bin/true", target: nobody, timeout: 1s}
  - {type: file, name: "`+dir+`/one", content: "1", ensure: present}
  - {type: file, name: "`+dir+`/two", content: "2", ensure: present}
`)
		r := c.run(t, "run", m)
		wantCode(t, r, 0)
		id := strings.TrimSpace(r.stdout)
		distEventually(t, 20*time.Second, "status shows the task waiting for pool nobody", func() (bool, string) {
			r := c.run(t, "status", id)
			return strings.Contains(r.stdout, "exec#stuck (pool nobody)") || strings.Contains(r.stdout, "failed"), r.stdout
		})
		rep := c.waitFinal(t, id, 30*time.Second)
		if rep.Status != "failed" || rep.Counts.Failed != 1 || rep.Counts.Changed != 2 {
			t.Fatalf("report: %+v", rep)
		}
		if e := rep.resource(t, "exec#stuck").Error; !strings.Contains(e, `"nobody"`) {
			t.Errorf("the failure does not name the pool: %q", e)
		}
	})

	t.Run("cancel a run with a long sleep", func(t *testing.T) {
		t.Parallel()
		// A worker of its own pool that kills what still runs 1s into its
		// shutdown: the cancelled sleep is not interrupted (yet).
		c.startWorker(t, "w-slow", "slow")
		dir := t.TempDir()
		m := writeFile(t, dir, "long.yaml", `resources:
  - {type: exec, name: nap, command: "/bin/sh -c 'touch `+dir+`/started; exec sleep 60'", target: slow}
  - {type: exec, name: after, command: "/bin/sh -c 'touch `+dir+`/after'", target: slow}
`)
		r := c.run(t, "run", m)
		wantCode(t, r, 0)
		id := strings.TrimSpace(r.stdout)
		distEventually(t, 20*time.Second, "the sleep started", func() (bool, string) {
			_, err := os.Stat(filepath.Join(dir, "started"))
			return err == nil, ""
		})
		r = c.run(t, "cancel", id)
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "cancelled") {
			t.Errorf("cancel:\n%s", r)
		}
		rep := c.waitFinal(t, id, 10*time.Second)
		if rep.Status != "cancelled" || rep.resource(t, "exec#after").Status != "cancelled" {
			t.Errorf("report after cancel: %+v", rep)
		}
		wantCode(t, c.run(t, "cancel", id), 0) // cancelling again is fine
		wantCode(t, c.run(t, "cancel", "no-such-run"), 2)
		wantAbsent(t, filepath.Join(dir, "after"))
	})

	t.Run("SIGTERM on a worker drains its task", func(t *testing.T) {
		t.Parallel()
		w := c.startWorker(t, "w-drain", "drain")
		dir := t.TempDir()
		m := writeFile(t, dir, "drain.yaml", `resources:
  - {type: exec, name: slow, command: "/bin/sh -c 'touch `+dir+`/started; sleep 2; touch `+dir+`/finished'", target: drain}
`)
		r := c.run(t, "run", m)
		wantCode(t, r, 0)
		id := strings.TrimSpace(r.stdout)
		distEventually(t, 20*time.Second, "the task started", func() (bool, string) {
			_, err := os.Stat(filepath.Join(dir, "started"))
			return err == nil, ""
		})
		if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := w.wait(t, 30*time.Second); code != 0 {
			t.Errorf("worker exited %d after SIGTERM:\n%s", code, w.Stderr())
		}
		if _, err := os.Stat(filepath.Join(dir, "finished")); err != nil {
			t.Errorf("the task did not finish before the worker exited: %v", err)
		}
		if rep := c.waitFinal(t, id, 20*time.Second); rep.Status != "succeeded" || rep.Resources[0].Worker != "w-drain" {
			t.Errorf("report: %+v", rep)
		}
		c.waitWorkers(t, func(names []string) bool { return !slices.Contains(names, "w-drain") })
	})
}

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// offlineAssignment is what `manifold workers --output json` says of one
// assignment of a worker.
type offlineAssignment struct {
	Version     uint64    `json:"version"`
	State       string    `json:"state"`
	Cached      bool      `json:"cached"`
	Offline     bool      `json:"offline"`
	Spooled     int       `json:"spooled"`
	LastRun     string    `json:"last_run"`
	LastChecked time.Time `json:"last_checked"`
}

// offlineRun is a line of `manifold runs --output json`.
type offlineRun struct {
	RunID      string `json:"run_id"`
	Status     string `json:"status"`
	Trigger    string `json:"trigger"`
	Assignment string `json:"assignment"`
	Offline    bool   `json:"offline"`
	Counts     struct {
		Total   int `json:"total"`
		Changed int `json:"changed"`
	} `json:"counts"`
}

// workerAssignment reads the named worker's entry for an assignment.
func workerAssignment(t *testing.T, url, worker, name string) (offlineAssignment, string) {
	t.Helper()
	r := runWith(t, runOpts{env: []string{"MANIFOLD_SERVER=" + url}}, "workers", "--output", "json")
	var out struct {
		Workers []struct {
			Name        string                       `json:"name"`
			Assignments map[string]offlineAssignment `json:"assignments"`
		} `json:"workers"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		return offlineAssignment{}, r.String()
	}
	for _, w := range out.Workers {
		if w.Name == worker {
			return w.Assignments[name], r.stdout
		}
	}
	return offlineAssignment{}, r.stdout
}

// listRuns reads `manifold runs --output json`.
func listRuns(t *testing.T, url string) ([]offlineRun, string) {
	t.Helper()
	r := runWith(t, runOpts{env: []string{"MANIFOLD_SERVER=" + url}}, "runs", "--limit", "50", "--output", "json")
	var out struct {
		Runs []offlineRun `json:"runs"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		return nil, r.String()
	}
	return out.Runs, r.stdout
}

// startServerAt starts `manifold server` on addr with its store in store
// and waits until it accepts connections.
func startServerAt(t *testing.T, addr, store string) *process {
	t.Helper()
	p := start(t, runOpts{}, "server", "--listen", addr, "--store-dir", store)
	distEventually(t, 20*time.Second, "the server at "+addr+" accepts connections", func() (bool, string) {
		nc, err := natsConnect("nats://"+addr, nats.Timeout(time.Second))
		if err != nil {
			return false, err.Error()
		}
		nc.Close()
		return true, ""
	})
	return p
}

// A worker whose server is down keeps its assignment converged from the
// plan it cached: a hand edit made while the server is stopped is
// repaired (watch event → offline run), and when the server is back the
// offline run is reported and listed by `manifold runs` and `manifold
// status` as an ordinary run with its trigger, marked offline.
func TestOfflineWorkerRepairsFromCachedPlanAndReportsLater(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(distFreePort(t))
	url := "nats://" + addr
	store := filepath.Join(dir, "jetstream")
	server := startServerAt(t, addr, store)
	start(t, runOpts{}, "coordinator", "--server", url, "--name", "coord-1", "--log-level", "debug")
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(root, "a.conf"), filepath.Join(root, "b.conf")
	manifest := filepath.Join(dir, "site.yaml")
	writeFile(t, dir, "site.yaml", fmt.Sprintf("resources:\n  - {type: file, name: %q, content: \"a managed\\n\"}\n  - {type: file, name: %q, content: \"b managed\\n\"}\n", a, b))
	worker := start(t, runOpts{}, "worker", "--server", url, "--name", "w1", "--pool", "web", "--concurrency", "2",
		"--state-dir", filepath.Join(dir, "state"), "--cache-dir", filepath.Join(dir, "cache"), "--log-level", "debug")
	distEventually(t, 30*time.Second, "assign is accepted", func() (bool, string) {
		r := runWith(t, runOpts{env: []string{"MANIFOLD_SERVER=" + url}}, "assign", "--pool", "web", "app", manifest)
		return r.code == 0, r.String()
	})
	distEventually(t, 30*time.Second, "w1 converged app and cached its plan", func() (bool, string) {
		st, raw := workerAssignment(t, url, "w1", "app")
		return st.State == "converged" && st.Cached, raw
	})
	runsBefore, _ := listRuns(t, url)

	// The server goes away; the worker is on its own.
	if err := server.stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "a.conf", "hand edit\n")
	distEventually(t, 20*time.Second, "a.conf repaired with the server down", func() (bool, string) {
		got, _ := os.ReadFile(a)
		return string(got) == "a managed\n", string(got)
	})
	worker.waitLog(t, "offline convergence run ended")
	if got, _ := os.ReadFile(b); string(got) != "b managed\n" {
		t.Fatalf("b.conf = %q, want it untouched", got)
	}

	// The server is back: the spooled run is reported.
	startServerAt(t, addr, store)
	off := waitOfflineDriftRun(t, 60*time.Second, "runs lists the offline run", func() ([]offlineRun, string) { return listRuns(t, url) })
	for _, r := range runsBefore {
		if r.RunID == off.RunID {
			t.Fatalf("offline run %s was listed before the outage", off.RunID)
		}
	}
	st := runWith(t, runOpts{env: []string{"MANIFOLD_SERVER=" + url}}, "status", off.RunID)
	wantCode(t, st, 0)
	if !strings.Contains(st.stdout, "offline (reported by worker w1)") || !strings.Contains(st.stdout, "trigger drift, assignment app") {
		t.Fatalf("status %s does not show an offline drift run reported by w1:\n%s", off.RunID, st.stdout)
	}
	text := runWith(t, runOpts{env: []string{"MANIFOLD_SERVER=" + url}}, "runs")
	if !strings.Contains(text.stdout, "drift (app) offline") {
		t.Fatalf("runs does not mark the offline run:\n%s", text.stdout)
	}
	distEventually(t, 20*time.Second, "w1's spool is empty", func() (bool, string) {
		st, raw := workerAssignment(t, url, "w1", "app")
		return st.Spooled == 0 && st.State == "converged", raw
	})
}

// waitOfflineDriftRun waits until list shows a run marked offline and
// checks it is the succeeded drift run of assignment app that changed its
// one drifted file.
func waitOfflineDriftRun(t *testing.T, within time.Duration, what string, list func() ([]offlineRun, string)) offlineRun {
	t.Helper()
	var off offlineRun
	distEventually(t, within, what, func() (bool, string) {
		runs, raw := list()
		for _, r := range runs {
			if r.Offline {
				off = r
				return true, raw
			}
		}
		return false, raw
	})
	if off.Trigger != "drift" || off.Assignment != "app" || off.Status != "succeeded" || off.Counts.Changed != 1 || off.Counts.Total != 1 {
		t.Fatalf("offline run = %+v, want a succeeded drift run of app that changed a.conf only", off)
	}
	return off
}

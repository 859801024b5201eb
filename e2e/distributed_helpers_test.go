package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// distCluster is a manifold deployment of separate processes: a server, a
// coordinator and workers, stopped (workers first) when the test ends.
type distCluster struct {
	url   string
	dir   string
	nc    *nats.Conn
	coord *process
}

// distStart starts `manifold server` on a free loopback port, a
// coordinator and one worker of pool default per name, and waits until
// each is ready: the server accepts connections, the API answers, every
// worker is listed by `manifold workers`.
func distStart(t *testing.T, workers ...string) *distCluster {
	t.Helper()
	c := &distCluster{dir: t.TempDir()}
	addr := "127.0.0.1:" + strconv.Itoa(distFreePort(t))
	c.url = "nats://" + addr
	start(t, runOpts{}, "server", "--listen", addr, "--store-dir", filepath.Join(c.dir, "jetstream"))
	distEventually(t, 20*time.Second, "the server accepts connections", func() (bool, string) {
		nc, err := natsConnect(c.url, nats.Timeout(time.Second))
		if err != nil {
			return false, err.Error()
		}
		c.nc = nc
		return true, ""
	})
	t.Cleanup(c.nc.Close)
	c.coord = start(t, runOpts{}, "coordinator", "--server", c.url, "--name", "coord-1", "--log-level", "debug")
	distEventually(t, 30*time.Second, "the coordinator serves the API", func() (bool, string) {
		msg, err := c.nc.Request("manifold.api.runs.list", []byte(`{"limit": 1}`), time.Second)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(string(msg.Data), `"runs"`), string(msg.Data)
	})
	var ps []*process
	for _, name := range workers {
		ps = append(ps, c.startWorker(t, name, "default"))
	}
	// Runs before each process's own cleanup: the workers drain at once,
	// not one after the other.
	t.Cleanup(func() {
		for _, p := range ps {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	})
	return c
}

// startWorker starts a worker of the pools with its own bundle cache (as
// on its own host) and waits until it is registered.
func (c *distCluster) startWorker(t *testing.T, name string, pools ...string) *process {
	t.Helper()
	args := []string{"worker", "--server", c.url, "--name", name, "--concurrency", "2",
		"--cache-dir", filepath.Join(c.dir, "cache-"+name), "--drain-timeout", "5s", "--log-level", "debug"}
	for _, p := range pools {
		args = append(args, "--pool", p)
	}
	p := start(t, runOpts{}, args...)
	c.waitWorkers(t, func(names []string) bool { return slices.Contains(names, name) })
	return p
}

// waitWorkers polls `manifold workers --output json` until ok accepts the
// listed names.
func (c *distCluster) waitWorkers(t *testing.T, ok func([]string) bool) []distWorker {
	t.Helper()
	var last []distWorker
	distEventually(t, 20*time.Second, "manifold workers lists the expected workers", func() (bool, string) {
		last = c.workers(t)
		names := make([]string, len(last))
		for i, w := range last {
			names[i] = w.Name
		}
		return ok(names), fmt.Sprint(names)
	})
	return last
}

// distWorker is a worker as `manifold workers --output json` prints it.
type distWorker struct {
	Name        string         `json:"name"`
	Pools       []string       `json:"pools"`
	Concurrency int            `json:"concurrency"`
	Running     []string       `json:"running"`
	Version     string         `json:"version"`
	Facts       map[string]any `json:"facts"`
	Seen        time.Time      `json:"seen"`
}

func (c *distCluster) workers(t *testing.T) []distWorker {
	t.Helper()
	r := c.run(t, "workers", "--output", "json")
	wantCode(t, r, 0)
	var out struct {
		Workers []distWorker `json:"workers"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("workers --output json: %v\n%s", err, r)
	}
	return out.Workers
}

// run runs a client command against the cluster's server.
func (c *distCluster) run(t *testing.T, args ...string) result {
	t.Helper()
	return runWith(t, runOpts{env: []string{"MANIFOLD_SERVER=" + c.url}}, args...)
}

// request sends a JSON request to an API endpoint with a plain NATS
// request and decodes the reply into reply; it returns the raw reply.
func (c *distCluster) request(t *testing.T, subject string, req, reply any) string {
	t.Helper()
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := c.nc.Request(subject, data, 30*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	if reply != nil {
		if err := json.Unmarshal(msg.Data, reply); err != nil {
			t.Fatalf("reply of %s: %v\n%s", subject, err, msg.Data)
		}
	}
	return string(msg.Data)
}

// distReport is a run report with the API's error envelope.
type distReport struct {
	report
	Error any `json:"error"`
}

// waitFinal polls runs.get until the run's status is final and returns the
// report.
func (c *distCluster) waitFinal(t *testing.T, runID string, timeout time.Duration) *report {
	t.Helper()
	var rep distReport
	distEventually(t, timeout, "run "+runID+" ends", func() (bool, string) {
		rep = distReport{}
		raw := c.request(t, "manifold.api.runs.get", map[string]string{"run_id": runID}, &rep)
		switch rep.Status {
		case "succeeded", "failed", "cancelled":
			return true, raw
		}
		return false, raw
	})
	return &rep.report
}

// distEventually polls cond every 50 ms until it holds, failing the test
// with cond's last word after timeout. It waits on the thing it needs, not
// a fixed time.
func distEventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; last: %s", timeout, what, last)
		}
		select {
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatalf("test ended while waiting for %s", what)
		}
	}
}

// distFreePort returns a loopback TCP port that was free a moment ago.
func distFreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// natsConnect connects to a server the tests started, as its admin (the
// nkey `manifold server` generated in $MANIFOLD_CREDENTIALS).
func natsConnect(url string, opts ...nats.Option) (*nats.Conn, error) {
	nkey, err := nats.NkeyOptionFromSeed(filepath.Join(os.Getenv("MANIFOLD_CREDENTIALS"), "admin.nk"))
	if err != nil {
		return nil, err
	}
	return nats.Connect(url, append(opts, nkey)...)
}

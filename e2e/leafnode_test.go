package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/manifold-run/manifold/bus"
)

// linkProxy is the network between a site and its hub: a TCP relay the
// site's leafnode remote dials, which the test cuts (every connection
// closed, nothing accepted) and restores on the same port.
type linkProxy struct {
	addr, target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newLinkProxy(t *testing.T, target string) *linkProxy {
	t.Helper()
	p := &linkProxy{addr: "127.0.0.1:" + strconv.Itoa(distFreePort(t)), target: target, conns: map[net.Conn]struct{}{}}
	p.up(t)
	t.Cleanup(p.down)
	return p
}

// up accepts and relays connections again.
func (p *linkProxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("link proxy: %v", err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.relay(c) })
		}
	})
}

func (p *linkProxy) relay(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut meanwhile
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var half sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
	}
	half.Go(func() { pipe(up, c) })
	half.Go(func() { pipe(c, up) })
	half.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// down cuts the link: the listener and every relayed connection close.
func (p *linkProxy) down() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// The user both servers of TestLeafnodeSiteConvergesThroughOutage know.
const leafUser, leafPassword = "manifold", "leaf-test-password"

// startNATS starts an embedded nats-server with opts (loopback, no logs,
// no signals) and shuts it down at cleanup.
func startNATS(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.NoLog, opts.NoSigs = "127.0.0.1", true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats server %s: %v", opts.ServerName, err)
	}
	go s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("nats server %s: not ready", opts.ServerName)
	}
	return s
}

// A site: a leafnode server with its own JetStream domain, linked to a hub
// (JetStream domain hub) that holds manifold's streams and the
// coordinator. A worker at the site (--js-domain hub) converges an
// assignment through the leaf; with the link cut it repairs a hand edit
// from its cached plan; with the link back, the offline run's record
// reaches the hub, where `manifold runs` lists it.
func TestLeafnodeSiteConvergesThroughOutage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	leafPort := distFreePort(t)
	hub := startNATS(t, &server.Options{ServerName: "hub", Username: leafUser, Password: leafPassword, Port: distFreePort(t), JetStream: true, JetStreamDomain: "hub",
		StoreDir: filepath.Join(dir, "hub"), LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: leafPort,
			// Else the site learns the hub's own leafnode address and
			// reconnects around the cut link.
			NoAdvertise: true}})
	link := newLinkProxy(t, "127.0.0.1:"+strconv.Itoa(leafPort))
	remote, err := url.Parse("nats-leaf://" + leafUser + ":" + leafPassword + "@" + link.addr)
	if err != nil {
		t.Fatal(err)
	}
	site := startNATS(t, &server.Options{ServerName: "site1", Username: leafUser, Password: leafPassword, Port: distFreePort(t), JetStream: true, JetStreamDomain: "site1",
		StoreDir: filepath.Join(dir, "site1"), LeafNode: server.LeafNodeOpts{ReconnectInterval: 100 * time.Millisecond,
			Remotes: []*server.RemoteLeafOpts{{URLs: []*url.URL{remote}}}}})
	linked := func(want int) func() (bool, string) {
		return func() (bool, string) {
			h, s := hub.NumLeafNodes(), site.NumLeafNodes()
			return h == want && s == want, fmt.Sprintf("leafnode connections: hub %d, site %d", h, s)
		}
	}
	distEventually(t, 10*time.Second, "the site is linked to the hub", linked(1))
	hubURL, siteURL := hub.ClientURL(), site.ClientURL()
	// Both servers know one user (not the nkeys of `manifold server`);
	// MANIFOLD_USER and MANIFOLD_PASSWORD are not a thing: flags.
	auth := []string{"--user", leafUser, "--password", leafPassword}
	atHub := func(args ...string) []string { return append(append(args, "--server", hubURL), auth...) }

	start(t, runOpts{}, atHub("coordinator", "--name", "hub-coord", "--log-level", "debug")...)
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(root, "a.conf"), filepath.Join(root, "b.conf")
	manifest := writeFile(t, dir, "site.yaml", fmt.Sprintf("resources:\n  - {type: file, name: %q, content: \"a managed\\n\"}\n  - {type: file, name: %q, content: \"b managed\\n\"}\n", a, b))
	worker := start(t, runOpts{}, append([]string{"worker", "--server", siteURL, "--js-domain", "hub", "--name", "site1-w1", "--pool", "web",
		"--state-dir", filepath.Join(dir, "state"), "--cache-dir", filepath.Join(dir, "cache"), "--log-level", "debug"}, auth...)...)
	distEventually(t, 30*time.Second, "assign is accepted at the hub", func() (bool, string) {
		r := runWith(t, runOpts{}, atHub("assign", "--pool", "web", "app", manifest)...)
		return r.code == 0, r.String()
	})
	distEventually(t, 30*time.Second, "site1-w1 converged app through the leaf and cached its plan", func() (bool, string) {
		st, raw := leafWorkerAssignment(t, atHub, "site1-w1", "app")
		return st.State == "converged" && st.Cached, raw
	})
	if got, _ := os.ReadFile(a); string(got) != "a managed\n" {
		t.Fatalf("a.conf = %q after the first run", got)
	}
	before, raw := leafRuns(t, atHub)
	if len(before) != 1 || before[0].Trigger == "" || before[0].Offline {
		t.Fatalf("runs at the hub before the outage: want the first convergence run only:\n%s", raw)
	}
	// The records of the two changed tasks reached the hub's results
	// bucket (a put on $KV.… from the site would be denied by the leaf).
	nc, err := nats.Connect(hubURL, nats.UserInfo(leafUser, leafPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	hubBus, err := bus.Open(t.Context(), nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	distEventually(t, 20*time.Second, "the first run's result records are at the hub", func() (bool, string) {
		keys, err := hubBus.Results().KeysMatching(t.Context(), before[0].RunID+".>")
		return len(keys) == 2, fmt.Sprintf("keys %v, error %v", keys, err)
	})

	// The link goes down; the worker's own server stays up.
	link.down()
	distEventually(t, 10*time.Second, "the link is down", linked(0))
	writeFile(t, root, "a.conf", "hand edit\n")
	distEventually(t, 20*time.Second, "a.conf repaired with the link down", func() (bool, string) {
		got, _ := os.ReadFile(a)
		return string(got) == "a managed\n", string(got)
	})
	worker.waitLog(t, "offline convergence run ended")
	if !strings.Contains(worker.Stderr()+worker.Stdout(), "no coordinator answers") {
		t.Fatalf("the worker did not say why it converged offline:\n%s", worker.Stderr())
	}

	// The link is back: the run reaches the hub.
	link.up(t)
	distEventually(t, 10*time.Second, "the link is up", linked(1))
	off := waitOfflineDriftRun(t, 30*time.Second, "runs at the hub lists the offline run", func() ([]offlineRun, string) { return leafRuns(t, atHub) })
	st := runWith(t, runOpts{}, atHub("status", off.RunID)...)
	wantCode(t, st, 0)
	if !strings.Contains(st.stdout, "offline (reported by worker site1-w1)") {
		t.Fatalf("status %s at the hub does not show the offline run of site1-w1:\n%s", off.RunID, st.stdout)
	}
	distEventually(t, 20*time.Second, "site1-w1's spool is empty and it is online", func() (bool, string) {
		st, raw := leafWorkerAssignment(t, atHub, "site1-w1", "app")
		return st.Spooled == 0 && st.State == "converged", raw
	})
}

// leafWorkerAssignment reads a worker's entry for an assignment with
// `manifold workers` and the arguments hub adds.
func leafWorkerAssignment(t *testing.T, hub func(...string) []string, worker, name string) (offlineAssignment, string) {
	t.Helper()
	r := runWith(t, runOpts{}, hub("workers", "--output", "json")...)
	var out struct {
		Workers []struct {
			Name        string                       `json:"name"`
			Assignments map[string]offlineAssignment `json:"assignments"`
		} `json:"workers"`
	}
	if r.code != 0 {
		return offlineAssignment{}, r.String()
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		return offlineAssignment{}, errors.Join(err, errors.New(r.stdout)).Error()
	}
	for _, w := range out.Workers {
		if w.Name == worker {
			return w.Assignments[name], r.stdout
		}
	}
	return offlineAssignment{}, r.stdout
}

// leafRuns reads `manifold runs --output json` with the arguments hub
// adds.
func leafRuns(t *testing.T, hub func(...string) []string) ([]offlineRun, string) {
	t.Helper()
	r := runWith(t, runOpts{}, hub("runs", "--limit", "50", "--output", "json")...)
	var out struct {
		Runs []offlineRun `json:"runs"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		return nil, r.String()
	}
	return out.Runs, r.stdout
}

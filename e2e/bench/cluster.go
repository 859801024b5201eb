package bench

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/manifold-run/manifold/bus"
)

// daemon is a long-running manifold process of a cluster.
type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
	// grace replaces stopGrace when set.
	grace time.Duration
}

// stopGrace bounds how long a daemon may take to stop after SIGTERM
// before its process group is killed.
const stopGrace = 10 * time.Second

// exited returns an error when the daemon has exited, naming it and
// quoting the end of its log.
func (d *daemon) exited() error {
	select {
	case <-d.done:
		b, _ := os.ReadFile(d.log)
		return fmt.Errorf("%s exited (%v): %s", d.name, d.err, tail(nil, b))
	default:
		return nil
	}
}

// stop sends SIGTERM to the daemon's process group and kills it when it
// has not exited within stopGrace.
func (d *daemon) stop() {
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(cmp.Or(d.grace, stopGrace)):
		killGroup(d.cmd)
		<-d.done
	}
}

// cluster is a manifold deployment of separate processes on loopback: a
// server, a coordinator and workers.
type cluster struct {
	h       *harness
	dir     string
	url     string
	nc      *nats.Conn
	server  *daemon
	coord   *daemon
	workers []*daemon
	opts    clusterOpts
}

// clusterOpts adjusts a cluster's processes.
type clusterOpts struct {
	// coordArgs are more flags of the coordinator.
	coordArgs []string
	// profileDir, when set, receives CPU profiles of the server and the
	// coordinator (MANIFOLD_CPU_PROFILE), named NAME-label.pprof.
	profileDir, label string
	// grace replaces stopGrace for the server and the coordinator when
	// set (a server with thousands of consumers takes longer to stop, and
	// its profile is written at exit).
	grace time.Duration
	// serverConfig, when set, is a NATS server configuration the server
	// starts with (--config, which then governs authentication: none).
	serverConfig string
}

// startCluster starts `manifold server` on a free loopback port and a
// coordinator, and waits until the coordinator's API answers.
func (h *harness) startCluster(ctx context.Context, dir string) (c *cluster, err error) {
	return h.startClusterWith(ctx, dir, clusterOpts{})
}

// startClusterWith is startCluster with options.
func (h *harness) startClusterWith(ctx context.Context, dir string, opts clusterOpts) (c *cluster, err error) {
	c = &cluster{h: h, dir: dir, opts: opts}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	// Workers create their bundle caches in dir.
	if err := h.mkdirs(dir); err != nil {
		return nil, err
	}
	if err := h.mkdirs(filepath.Join(dir, "logs")); err != nil {
		return nil, err
	}
	if err := h.mkdirs(filepath.Join(dir, "jetstream")); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	c.url = "nats://" + addr
	serverArgs := []string{"server", "--listen", addr, "--store-dir", filepath.Join(dir, "jetstream"), "--insecure-no-auth"}
	if opts.serverConfig != "" {
		conf := filepath.Join(dir, "server.conf")
		if err := os.WriteFile(conf, []byte(opts.serverConfig), 0o644); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		serverArgs = append(serverArgs[:len(serverArgs)-1], "--config", conf)
	}
	if c.server, err = c.start("server", serverArgs...); err != nil {
		return nil, err
	}
	err = c.waitFor(ctx, 30*time.Second, "the server accepts connections", func() (bool, string) {
		nc, err := nats.Connect(c.url, nats.Timeout(time.Second))
		if err != nil {
			return false, err.Error()
		}
		c.nc = nc
		return true, ""
	})
	if err != nil {
		return nil, err
	}
	if c.coord, err = c.start("coordinator", append([]string{"coordinator", "--server", c.url, "--name", "bench-coord", "--log-level", "warn"}, opts.coordArgs...)...); err != nil {
		return nil, err
	}
	err = c.waitFor(ctx, 30*time.Second, "the coordinator serves the API", func() (bool, string) {
		msg, err := c.nc.Request(bus.SubjectAPIRunsList, []byte(`{"limit": 1}`), time.Second)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(string(msg.Data), `"runs"`), string(msg.Data)
	})
	return c, err
}

// addWorkers starts workers of pool default until there are n, and waits
// until `manifold workers` lists them all.
func (c *cluster) addWorkers(ctx context.Context, n int) error {
	for len(c.workers) < n {
		name := fmt.Sprintf("w%d", len(c.workers)+1)
		d, err := c.start(name, "worker", "--server", c.url, "--name", name, "--pool", "default",
			"--cache-dir", filepath.Join(c.dir, "cache-"+name), "--drain-timeout", "5s", "--log-level", "warn")
		if err != nil {
			return err
		}
		c.workers = append(c.workers, d)
	}
	return c.waitFor(ctx, 30*time.Second, fmt.Sprintf("manifold workers lists %d workers", n), func() (bool, string) {
		s := c.h.run.run(ctx, 30*time.Second, "", c.h.manifold, "workers", "--server", c.url, "--output", "json")
		if s.err != nil {
			return false, s.err.Error()
		}
		for _, w := range c.workers {
			if !strings.Contains(string(s.stdout), `"name": "`+w.name+`"`) && !strings.Contains(string(s.stdout), `"name":"`+w.name+`"`) {
				return false, string(s.stdout)
			}
		}
		return true, ""
	})
}

// start starts a daemon whose output goes to a log file.
func (c *cluster) start(name string, args ...string) (*daemon, error) {
	d := &daemon{name: name, log: filepath.Join(c.dir, "logs", name+".log"), done: make(chan struct{})}
	f, err := os.Create(d.log)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	d.cmd = c.h.run.command(c.h.manifold, args...)
	d.grace = c.opts.grace
	if c.opts.profileDir != "" && (name == "server" || name == "coordinator") {
		d.cmd.Env = append(d.cmd.Env, "MANIFOLD_CPU_PROFILE="+filepath.Join(c.opts.profileDir, name+"-"+c.opts.label+".pprof"))
	}
	d.cmd.Stdout, d.cmd.Stderr = f, f
	if err := d.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: start %s: %w", name, err)
	}
	go func() {
		d.err = d.cmd.Wait()
		f.Close()
		close(d.done)
	}()
	return d, nil
}

// waitFor polls cond every 50 ms until it holds, failing after timeout or
// when a daemon of the cluster exits.
func (c *cluster) waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return nil
		}
		for _, d := range c.daemons() {
			if err := d.exited(); err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s (timeout); last: %s", timeout, what, last)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// daemons returns the cluster's running processes.
func (c *cluster) daemons() []*daemon {
	var ds []*daemon
	for _, d := range append([]*daemon{c.server, c.coord}, c.workers...) {
		if d != nil {
			ds = append(ds, d)
		}
	}
	return ds
}

// stop stops the workers, then the coordinator, then the server.
func (c *cluster) stop() {
	if c.nc != nil {
		c.nc.Close()
	}
	for _, w := range c.workers {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGTERM)
	}
	for _, w := range c.workers {
		w.stop()
	}
	for _, d := range []*daemon{c.coord, c.server} {
		if d != nil {
			d.stop()
		}
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

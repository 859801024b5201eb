package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"

	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/file"
	"github.com/manifold-run/manifold/worker"
)

// fleetHostsCommand is the hidden command of the harness's binary that
// holds simulated hosts: `benchrun fleet-hosts --server URL --first K --n
// M --root DIR --cache-dir DIR`.
const fleetHostsCommand = "fleet-hosts"

// fleetReadyLine is what a host process prints on stdout once its n hosts
// are registered.
func fleetReadyLine(n int) string { return fmt.Sprintf("ready %d", n) }

// hostConfig is the command line of a host process.
type hostConfig struct {
	server, creds, root, cacheDir, pool, cpuProfile string
	// executor is file (real files under the host's root) or memory
	// (the file type's contents kept in the process: no disk).
	executor string
	// pulls is PullsShared or PullsHost.
	pulls    string
	first, n int
}

// How the simulated hosts of a process take the pool's tasks.
const (
	// PullsShared: one puller per host process (worker.Config.PoolConsumers).
	PullsShared = "shared"
	// PullsHost: one per host, as a real fleet's.
	PullsHost = "host"
)

// fleetHostsMain runs a host process: n simulated hosts, host-<first> to
// host-<first+n-1>, each a worker.Worker with its own NATS connection,
// name, facts (node, role, index), pool and root directory, concurrency 1.
// It prints fleetReadyLine once every host is registered, and stops them
// (draining, deregistering) when ctx ends.
func fleetHostsMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchrun "+fleetHostsCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var hc hostConfig
	fs.StringVar(&hc.server, "server", "", "NATS URL of the manifold server")
	fs.StringVar(&hc.creds, "creds", "", "credentials file of the hosts' connections (default: none)")
	fs.IntVar(&hc.first, "first", 1, "number of the first host")
	fs.IntVar(&hc.n, "n", 1, "number of hosts")
	fs.StringVar(&hc.root, "root", "", "directory of the hosts' roots (host-NNNNN/ each)")
	fs.StringVar(&hc.cacheDir, "cache-dir", "", "directory of the hosts' bundle caches (host-NNNNN/ each)")
	fs.StringVar(&hc.pool, "pool", fleetPool, "pool every host takes")
	fs.StringVar(&hc.cpuProfile, "cpu-profile", "", "write a CPU profile of this process")
	fs.StringVar(&hc.executor, "executor", ExecutorFile, "file: real files under each host's root; memory: file contents kept in memory (no disk)")
	fs.StringVar(&hc.pulls, "pulls", PullsShared, "shared: one puller of the pool per process; host: one per host")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if hc.server == "" || hc.root == "" || hc.cacheDir == "" || hc.n < 1 || hc.first < 1 || fs.NArg() > 0 ||
		(hc.executor != ExecutorFile && hc.executor != ExecutorMemory) || (hc.pulls != PullsShared && hc.pulls != PullsHost) {
		fmt.Fprintln(stderr, "benchrun fleet-hosts: --server, --root and --cache-dir are required, --n and --first at least 1, --executor file or memory, --pulls shared or host, no arguments")
		return 2
	}
	// A descriptor per host's connection, and the files of its run.
	if got, err := raiseFileLimit(2*hc.n + 256); err != nil {
		fmt.Fprintf(stderr, "benchrun fleet-hosts: open files limit %d: %v\n", got, err)
	}
	if hc.cpuProfile != "" {
		if f, err := os.Create(hc.cpuProfile); err == nil && pprof.StartCPUProfile(f) == nil {
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pool, err := poolPuller(ctx, hc)
	if err != nil {
		fmt.Fprintf(stderr, "benchrun fleet-hosts: %v\n", err)
		return 1
	}
	hosts, err := startHosts(ctx, hc, pool, log)
	defer func() {
		stopHosts(hosts)
		if pool != nil {
			pool.nc.Close()
		}
	}()
	if err != nil {
		fmt.Fprintf(stderr, "benchrun fleet-hosts: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, fleetReadyLine(len(hosts)))
	<-ctx.Done()
	return 0
}

// simHost is one simulated host.
type simHost struct {
	nc *nats.Conn
	w  *worker.Worker
}

// sharedPuller is the pool's consumer the hosts of a process share, on a
// connection of its own.
type sharedPuller struct {
	nc *nats.Conn
	c  *bus.Consumer
}

// poolPuller returns the process's shared puller of hc's pool, or nil
// with PullsHost.
func poolPuller(ctx context.Context, hc hostConfig) (*sharedPuller, error) {
	if hc.pulls != PullsShared {
		return nil, nil
	}
	nc, err := bus.Connect(bus.ConnectConfig{URL: hc.server, Name: "pool-puller", Creds: hc.creds})
	if err != nil {
		return nil, fmt.Errorf("pool puller: %w", err)
	}
	b, err := bus.Attach(ctx, nc, bus.Config{})
	if err == nil {
		var c *bus.Consumer
		if c, err = b.TaskConsumer(ctx, hc.pool); err == nil {
			return &sharedPuller{nc: nc, c: c}, nil
		}
	}
	nc.Close()
	return nil, fmt.Errorf("pool puller: %w", err)
}

// startHosts starts the hosts of hc, a few at a time; on error it returns
// those started.
func startHosts(ctx context.Context, hc hostConfig, pool *sharedPuller, log *slog.Logger) ([]*simHost, error) {
	hosts := make([]*simHost, hc.n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range hc.n {
		g.Go(func() error {
			h, err := startHost(gctx, hc, hc.first+i, pool, log)
			hosts[i] = h
			return err
		})
	}
	err := g.Wait()
	started := hosts[:0]
	for _, h := range hosts {
		if h != nil {
			started = append(started, h)
		}
	}
	return started, err
}

// startHost starts simulated host number i: its root and cache
// directories, its connection, its worker.
func startHost(ctx context.Context, hc hostConfig, i int, pool *sharedPuller, log *slog.Logger) (*simHost, error) {
	name := hostName(i)
	root := filepath.Join(hc.root, name)
	if err := os.MkdirAll(filepath.Join(root, fleetDir), 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	nc, err := bus.Connect(bus.ConnectConfig{URL: hc.server, Name: name, Creds: hc.creds})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	b, err := bus.Attach(ctx, nc, bus.Config{})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	reg := hostRegistry(root)
	if hc.executor == ExecutorMemory {
		reg = memoryRegistry()
	}
	var pulls map[string]*bus.Consumer
	if pool != nil {
		pulls = map[string]*bus.Consumer{hc.pool: pool.c}
	}
	w, err := worker.New(worker.Config{Bus: b, Registry: reg, Name: name, Pools: []string{hc.pool},
		Concurrency: 1, Logger: log, Version: "bench", CacheDir: filepath.Join(hc.cacheDir, name),
		Facts: map[string]any{"node": name, "role": "fleet", "index": i}, PoolConsumers: pulls})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := w.Start(context.WithoutCancel(ctx)); err != nil {
		nc.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &simHost{nc: nc, w: w}, nil
}

// stopHosts drains and deregisters the hosts, a few at a time, and closes
// their connections.
func stopHosts(hosts []*simHost) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, h := range hosts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			h.w.Stop()
			h.nc.Close()
		})
	}
	wg.Wait()
}

// hostRegistry is a simulated host's registry: the file type alone, every
// path taken under root, as if root were the host's /. The files are
// real; only their place differs from a real host's.
func hostRegistry(root string) *resources.Registry {
	r := resources.NewRegistry()
	r.Register(file.Type, func(spec resources.Spec) (resources.Resource, error) {
		if !filepath.IsAbs(spec.Name) {
			return nil, errors.New("a simulated host's file needs an absolute path")
		}
		spec.Name = filepath.Join(root, spec.Name)
		return file.New(spec)
	}, resources.WithProperties(file.Properties{}))
	return r
}

// Executors of simulated hosts.
const (
	// ExecutorFile writes real files under each host's root.
	ExecutorFile = "file"
	// ExecutorMemory keeps the file type's contents in the host's memory.
	ExecutorMemory = "memory"
)

// memoryRegistry is a simulated host's registry whose file type keeps
// contents in memory: check, apply and the engine's re-check compare and
// store a map entry (templates are rendered, outcomes reported, as for
// real files), so a run costs the control plane and no disk.
func memoryRegistry() *resources.Registry {
	var files sync.Map // path → content
	r := resources.NewRegistry()
	r.Register(file.Type, func(spec resources.Spec) (resources.Resource, error) {
		var p file.Properties
		if err := resources.DecodeProperties(spec.Properties, &p); err != nil {
			return nil, err
		}
		f := &memFile{files: &files, path: spec.Name}
		if p.Content != nil {
			f.content = *p.Content
		}
		return f, nil
	}, resources.WithProperties(file.Properties{}))
	return r
}

// memFile is a file resource of ExecutorMemory.
type memFile struct {
	files         *sync.Map
	path, content string
}

var _ resources.Resource = (*memFile)(nil)

// Validate accepts every file.
func (f *memFile) Validate() error { return nil }

// CheckApply compares the stored content, and stores it when applying.
func (f *memFile) CheckApply(_ context.Context, _ *resources.Env, apply bool) (resources.Result, error) {
	if old, ok := f.files.Load(f.path); ok && old.(string) == f.content {
		return resources.Result{}, nil
	}
	if apply {
		f.files.Store(f.path, f.content)
	}
	return resources.Result{Changed: true, Message: "content differs"}, nil
}

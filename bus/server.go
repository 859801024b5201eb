package bus

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ServerConfig configures an embedded NATS server with JetStream.
type ServerConfig struct {
	// StoreDir is where JetStream keeps its data. Required.
	StoreDir string
	// Listen is the client address as host:port. Empty means no listener:
	// clients connect in-process only, so two embedded servers never
	// collide on a port. Port 0 picks a free port.
	Listen string
	// ServerName names the server; required in a cluster. Defaults to a
	// name NATS generates.
	ServerName string
	// ClusterName, ClusterListen and Routes form a cluster when
	// ClusterListen is set.
	ClusterName   string
	ClusterListen string
	Routes        []string
	// ConfigFile is a NATS server configuration file; flags above override
	// what it sets.
	ConfigFile string
	// Config is NATS server configuration text (authorization, for
	// instance), applied after ConfigFile and before the flags above.
	Config string
	// ReadyTimeout bounds start-up. Defaults to 10s.
	ReadyTimeout time.Duration
}

// Server is a running embedded NATS server.
type Server struct {
	ns     *server.Server
	listen bool
	lock   *storeLock
}

// StartServer starts an embedded NATS server with JetStream and waits until
// it accepts connections. It holds the lock of the store directory
// (StoreLockFile) until Shutdown: a store directory another live server
// uses is ErrStoreInUse.
func StartServer(cfg ServerConfig) (_ *Server, err error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("bus: server needs a store directory")
	}
	lock, err := lockStore(cfg.StoreDir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.release()
		}
	}()
	opts := &server.Options{}
	if cfg.ConfigFile != "" {
		o, err := server.ProcessConfigFile(cfg.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("bus: server config %s: %w", cfg.ConfigFile, err)
		}
		opts = o
	}
	if cfg.Config != "" {
		if err := opts.ProcessConfigString(cfg.Config); err != nil {
			return nil, fmt.Errorf("bus: server config: %w", err)
		}
	}
	opts.JetStream = true
	opts.StoreDir = cfg.StoreDir
	opts.NoSigs = true
	opts.NoLog = true
	if cfg.ServerName != "" {
		opts.ServerName = cfg.ServerName
	}
	if cfg.Listen == "" && cfg.ConfigFile == "" {
		opts.DontListen = true
	} else if cfg.Listen != "" {
		host, port, err := splitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("bus: listen address %q: %w", cfg.Listen, err)
		}
		opts.Host, opts.Port = host, port
		if port == 0 {
			opts.Port = server.RANDOM_PORT
		}
	}
	if cfg.ClusterListen != "" {
		host, port, err := splitHostPort(cfg.ClusterListen)
		if err != nil {
			return nil, fmt.Errorf("bus: cluster address %q: %w", cfg.ClusterListen, err)
		}
		opts.Cluster.Name = cfg.ClusterName
		if opts.Cluster.Name == "" {
			opts.Cluster.Name = "manifold"
		}
		opts.Cluster.Host, opts.Cluster.Port = host, port
		opts.Routes = server.RoutesFromStr(strings.Join(cfg.Routes, ","))
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: start server: %w", err)
	}
	go ns.Start()
	timeout := cfg.ReadyTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if !ns.ReadyForConnections(timeout) {
		ns.Shutdown()
		return nil, fmt.Errorf("bus: server not ready after %s", timeout)
	}
	return &Server{ns: ns, listen: !opts.DontListen, lock: lock}, nil
}

// ClientURL returns the URL clients connect to, or "" when the server has
// no listener.
func (s *Server) ClientURL() string {
	if !s.listen {
		return ""
	}
	return s.ns.ClientURL()
}

// Connect opens a connection to the server: in-process when it has no
// listener.
func (s *Server) Connect(name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name)}
	if !s.listen {
		opts = append(opts, nats.InProcessServer(s.ns))
	}
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect to embedded server: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits for it to finish. Safe to call twice.
func (s *Server) Shutdown() {
	if s == nil || s.ns == nil {
		return
	}
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.lock.release()
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return host, port, nil
}

package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/manifold-run/manifold/bus"
)

const serverAbout = `Runs a standalone NATS server with JetStream for manifold, until SIGINT or
SIGTERM. Sites with their own NATS cluster do not need it. It prints the
URL clients connect to.

Accounts, users, TLS and anything else NATS supports go in a NATS server
configuration file (--config); the flags override what it sets. For a
cluster give every server a --name, a --cluster address and --routes to
the others; coordinators then provision with --replicas 3.`

func runServer(ctx context.Context, st IO, args []string) int {
	var (
		cfg    bus.ServerConfig
		routes string
	)
	fs := newFlags("server", "--listen HOST:PORT --store-dir DIR [flags]", serverAbout, st, args)
	fs.StringVar(&cfg.Listen, "listen", "", "client address HOST:PORT (default 127.0.0.1:4222 without --config; port 0 picks a free one)")
	fs.StringVar(&cfg.StoreDir, "store-dir", "", "JetStream storage directory (required)")
	fs.StringVar(&cfg.ConfigFile, "config", "", "NATS server configuration file (accounts, TLS, ...)")
	fs.StringVar(&cfg.ServerName, "name", "", "server name (required in a cluster)")
	fs.StringVar(&cfg.ClusterName, "cluster-name", "manifold", "cluster name")
	fs.StringVar(&cfg.ClusterListen, "cluster", "", "cluster (route) address HOST:PORT; forms a cluster with --routes")
	fs.StringVar(&routes, "routes", "", "routes to the other servers of the cluster, comma-separated (nats://host:port,...)")
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(st.Stderr, "manifold server: unexpected argument %q\n", pos[0])
		return ExitInvalid
	}
	if cfg.StoreDir == "" {
		fmt.Fprintln(st.Stderr, "manifold server: --store-dir is required")
		return ExitInvalid
	}
	if cfg.Listen == "" && cfg.ConfigFile == "" {
		cfg.Listen = "127.0.0.1:4222"
	}
	if routes != "" {
		if cfg.ClusterListen == "" {
			fmt.Fprintln(st.Stderr, "manifold server: --routes needs --cluster")
			return ExitInvalid
		}
		for r := range strings.SplitSeq(routes, ",") {
			if r = strings.TrimSpace(r); r != "" {
				cfg.Routes = append(cfg.Routes, r)
			}
		}
	}
	srv, err := bus.StartServer(cfg)
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold server: %v\n", err)
		return ExitUnavailable
	}
	defer srv.Shutdown()
	fmt.Fprintf(st.Stdout, "manifold server listening on %s (JetStream store %s)\n", srv.ClientURL(), cfg.StoreDir)
	<-ctx.Done()
	fmt.Fprintln(st.Stdout, "manifold server: shutting down")
	return ExitOK
}

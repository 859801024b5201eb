package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/manifold-run/manifold/bus"
)

const serverAbout = `Runs a standalone NATS server with JetStream for manifold, until SIGINT or
SIGTERM. Sites with their own NATS cluster do not need it. It prints the
URL clients connect to.

Without --config it admits no anonymous client: on first start it creates
an nkey per role (submitter, coordinator, worker, admin) in the
credentials directory (--credentials; default $MANIFOLD_CREDENTIALS, else
/etc/manifold/credentials for root, ~/.config/manifold/credentials for
others), mode 0600, where manifold's commands of the same user find them,
and writes the NATS CLI context "manifold" (admin). --insecure-no-auth
admits anyone who can reach the port instead.

Accounts, users, TLS and anything else NATS supports go in a NATS server
configuration file (--config), which then governs authentication; the
flags override what it sets. For a
cluster give every server a --name, a --cluster address and --routes to
the others; coordinators then provision with --replicas 3.`

func runServer(ctx context.Context, st IO, args []string) int {
	var (
		cfg         bus.ServerConfig
		routes      string
		credentials string
		noAuth      bool
	)
	fs := newFlags("server", "--listen HOST:PORT --store-dir DIR [flags]", serverAbout, st, args)
	fs.StringVar(&cfg.Listen, "listen", "", "client address HOST:PORT (default 127.0.0.1:4222 without --config; port 0 picks a free one)")
	fs.StringVar(&cfg.StoreDir, "store-dir", "", "JetStream storage directory (required)")
	fs.StringVar(&cfg.ConfigFile, "config", "", "NATS server configuration file (accounts, TLS, ...)")
	fs.StringVar(&cfg.ServerName, "name", "", "server name (required in a cluster)")
	fs.StringVar(&cfg.ClusterName, "cluster-name", "manifold", "cluster name")
	fs.StringVar(&cfg.ClusterListen, "cluster", "", "cluster (route) address HOST:PORT; forms a cluster with --routes")
	fs.StringVar(&routes, "routes", "", "routes to the other servers of the cluster, comma-separated (nats://host:port,...)")
	fs.StringVar(&credentials, "credentials", "", "directory of the per-role nkeys, created on first start (default: $"+credentialsEnv+", else "+systemCredentialsDir+" for root, ~/.config/manifold/credentials for others)")
	fs.BoolVar(&noAuth, "insecure-no-auth", false, "admit clients without credentials: anyone who reaches the port can run commands on every worker")
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
	if cfg.ConfigFile != "" && (credentials != "" || noAuth) {
		fmt.Fprintln(st.Stderr, "manifold server: --credentials and --insecure-no-auth apply without --config only (the file governs authentication)")
		return ExitInvalid
	}
	if credentials != "" && noAuth {
		fmt.Fprintln(st.Stderr, "manifold server: --credentials and --insecure-no-auth exclude each other")
		return ExitInvalid
	}
	if cfg.Listen == "" && cfg.ConfigFile == "" {
		cfg.Listen = "127.0.0.1:4222"
	}
	credDir := ""
	if cfg.ConfigFile == "" && !noAuth {
		dir, _, err := credentialsDir(credentials, st.Getenv, os.Geteuid())
		if err != nil {
			fmt.Fprintf(st.Stderr, "manifold server: %v\n", err)
			return ExitInvalid
		}
		pubs, err := ensureCredentials(dir)
		if err != nil {
			fmt.Fprintf(st.Stderr, "manifold server: %v\n", err)
			return ExitUnavailable
		}
		cfg.Config, credDir = serverAuthConfig(pubs), dir
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
	switch {
	case credDir != "":
		fmt.Fprintf(st.Stdout, "manifold server: clients authenticate with the nkeys in %s (%s.nk, %s.nk, %s.nk, %s.nk)\n",
			credDir, roleSubmitter, roleCoordinator, roleWorker, roleAdmin)
		if path, err := writeNATSContext(st.Getenv, srv.ClientURL(), credDir); err != nil {
			fmt.Fprintf(st.Stderr, "manifold server: nats CLI context not written: %v\n", err)
		} else {
			fmt.Fprintf(st.Stdout, "manifold server: nats CLI context %s (nats --context %s ...)\n", path, natsContextName)
		}
	case noAuth:
		fmt.Fprintln(st.Stderr, "manifold server: WARNING: --insecure-no-auth: anyone who can connect can submit runs, that is run commands on every worker")
	}
	<-ctx.Done()
	fmt.Fprintln(st.Stdout, "manifold server: shutting down")
	return ExitOK
}

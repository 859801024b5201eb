package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/manifold-run/manifold/bus"
)

// DefaultServer is the NATS server networked commands connect to when
// neither --server, --context nor MANIFOLD_SERVER says otherwise.
const DefaultServer = "nats://127.0.0.1:4222"

// connFlags are the standard NATS connection flags every networked command
// takes. Precedence: a flag given on the command line, then the NATS CLI
// context named by --context, then MANIFOLD_SERVER (the URL only), then
// DefaultServer.
//
// Without credentials from a flag or the context, the process
// authenticates with its role's nkey from the credentials directory
// (--credentials, $MANIFOLD_CREDENTIALS, else the default one `manifold
// server` writes; see credentialsDir) when the file is there.
type connFlags struct {
	server, creds, nkey, user, password string
	tlsCA, tlsCert, tlsKey              string
	context                             string
	credentials                         string
	// jsDomain is the JetStream domain of manifold's streams and buckets
	// (a client of a site's leafnode server: docs/offline.md).
	jsDomain string
	// role picks the nkey in the credentials directory. Defaults to
	// roleSubmitter.
	role role
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.server, "server", "", "NATS server URL(s), comma-separated (default: $MANIFOLD_SERVER or "+DefaultServer+")")
	fs.StringVar(&c.creds, "creds", "", "NATS credentials file (JWT and seed)")
	fs.StringVar(&c.nkey, "nkey", "", "NATS nkey seed file")
	fs.StringVar(&c.user, "user", "", "NATS user name")
	fs.StringVar(&c.password, "password", "", "NATS password")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "CA certificate file to verify the server")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "client certificate file")
	fs.StringVar(&c.tlsKey, "tls-key", "", "client private key file")
	fs.StringVar(&c.jsDomain, "js-domain", "", "`DOMAIN`: JetStream domain holding manifold's streams and buckets, for a process connected to a leafnode server of another domain (a site's; default: $MANIFOLD_JS_DOMAIN, else the connected server's JetStream)")
	fs.StringVar(&c.context, "context", "", "NATS CLI context: a name in ~/.config/nats/context/ or a path to its JSON file")
	fs.StringVar(&c.credentials, "credentials", "", "`DIR` holding the nkeys 'manifold server' generates, used when no other credentials are given (default: $"+credentialsEnv+", else "+systemCredentialsDir+" for root, ~/.config/manifold/credentials for others)")
}

// domain returns the JetStream domain to use: --js-domain, else
// $MANIFOLD_JS_DOMAIN, else "" (the connected server's JetStream).
func (c *connFlags) domain(getenv func(string) string) string {
	return cmp.Or(c.jsDomain, getenv("MANIFOLD_JS_DOMAIN"))
}

// explicit reports whether the command line names a server (--server or
// --context); `manifold apply` then goes remote instead of embedded.
func (c *connFlags) explicit() bool { return c.server != "" || c.context != "" }

// natsContext is the part of a NATS CLI context file manifold reads.
type natsContext struct {
	URL      string `json:"url"`
	Creds    string `json:"creds"`
	NKey     string `json:"nkey"`
	User     string `json:"user"`
	Password string `json:"password"`
	CA       string `json:"ca"`
	Cert     string `json:"cert"`
	Key      string `json:"key"`
}

// contextPath returns where the NATS CLI keeps the context name:
// $XDG_CONFIG_HOME/nats/context/<name>.json, else
// ~/.config/nats/context/<name>.json. A name with a path separator or a
// .json suffix is a path.
func contextPath(name string, getenv func(string) string) (string, error) {
	if strings.ContainsRune(name, os.PathSeparator) || strings.HasSuffix(name, ".json") {
		return name, nil
	}
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			var err error
			if home, err = os.UserHomeDir(); err != nil {
				return "", fmt.Errorf("context %s: %w", name, err)
			}
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "nats", "context", name+".json"), nil
}

// config resolves the connection settings; name is the connection name the
// server shows.
func (c *connFlags) config(getenv func(string) string, name string) (bus.ConnectConfig, error) {
	var nctx natsContext
	if c.context != "" {
		path, err := contextPath(c.context, getenv)
		if err != nil {
			return bus.ConnectConfig{}, err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return bus.ConnectConfig{}, usageErrorf("--context %s: %v", c.context, err)
		}
		if err := json.Unmarshal(data, &nctx); err != nil {
			return bus.ConnectConfig{}, usageErrorf("--context %s: %s: %v", c.context, path, err)
		}
	}
	cfg := bus.ConnectConfig{
		URL:      cmp.Or(c.server, nctx.URL, getenv("MANIFOLD_SERVER"), DefaultServer),
		Name:     name,
		Creds:    cmp.Or(c.creds, nctx.Creds),
		NKey:     cmp.Or(c.nkey, nctx.NKey),
		User:     cmp.Or(c.user, nctx.User),
		Password: cmp.Or(c.password, nctx.Password),
		TLSCA:    cmp.Or(c.tlsCA, nctx.CA),
		TLSCert:  cmp.Or(c.tlsCert, nctx.Cert),
		TLSKey:   cmp.Or(c.tlsKey, nctx.Key),
	}
	if c.role == roleWorker {
		// The worker role may subscribe to its own inbox prefix only.
		cfg.InboxPrefix = bus.WorkerInboxPrefix
	}
	if cfg.Creds == "" && cfg.NKey == "" && cfg.User == "" {
		nkey, err := c.defaultNKey(getenv, os.Geteuid())
		if err != nil {
			return bus.ConnectConfig{}, err
		}
		cfg.NKey = nkey
	}
	return cfg, nil
}

// defaultNKey returns the role's seed file in the credentials directory,
// or "" when the default directory has none (a server without
// authentication). A directory named by the flag or the variable must
// hold it.
func (c *connFlags) defaultNKey(getenv func(string) string, euid int) (string, error) {
	dir, explicit, err := credentialsDir(c.credentials, getenv, euid)
	if err != nil {
		return "", err
	}
	path := seedFile(dir, cmp.Or(c.role, roleSubmitter))
	if _, err := os.Stat(path); err != nil {
		if explicit {
			return "", usageErrorf("credentials: %v", err)
		}
		return "", nil
	}
	return path, nil
}

// connect connects once (clients fail fast when no server answers).
func (c *connFlags) connect(st IO, name string) (*nats.Conn, error) {
	cfg, err := c.config(st.Getenv, name)
	if err != nil {
		return nil, err
	}
	nc, err := bus.Connect(cfg)
	if errors.Is(err, nats.ErrAuthorization) && cfg.NKey == "" && cfg.Creds == "" && cfg.User == "" {
		dir, _, _ := credentialsDir(c.credentials, st.Getenv, os.Geteuid())
		return nil, fmt.Errorf("%w: the server requires credentials and %s has none for role %s (pass --credentials DIR, set $%s, or --creds/--nkey/--user)",
			err, dir, cmp.Or(c.role, roleSubmitter), credentialsEnv)
	}
	return nc, err
}

// errNoBus: the server answers but no coordinator has provisioned
// manifold's streams and buckets on it yet.
var errNoBus = errors.New("manifold's streams and buckets are not on this server yet: start `manifold coordinator` against it first")

// attach connects and attaches to the provisioned bus, for clients. The
// caller closes b.Conn().
func (c *connFlags) attach(ctx context.Context, st IO, name string) (*bus.Bus, error) {
	nc, err := c.connect(st, name)
	if err != nil {
		return nil, err
	}
	b, err := bus.Attach(ctx, nc, bus.Config{Domain: c.domain(st.Getenv)})
	if err != nil {
		nc.Close()
		if errors.Is(err, bus.ErrNotFound) {
			return nil, fmt.Errorf("%w (%v)", errNoBus, err)
		}
		return nil, err
	}
	return b, nil
}

// connectRetry connects, retrying every second until ctx ends, for
// long-running services started before their server. Each failure is
// reported to onRetry.
func (c *connFlags) connectRetry(ctx context.Context, st IO, name string, onRetry func(error)) (*nats.Conn, error) {
	for {
		nc, err := c.connect(st, name)
		if err == nil || isUsage(err) {
			return nc, err
		}
		onRetry(err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last error: %w)", context.Cause(ctx), err)
		case <-time.After(time.Second):
		}
	}
}

// connExit prints a connection error and returns its exit code: 2 for bad
// flags or context files, 3 otherwise.
func connExit(st IO, cmd string, err error) int {
	fmt.Fprintf(st.Stderr, "manifold %s: %v\n", cmd, err)
	if isUsage(err) {
		return ExitInvalid
	}
	return ExitUnavailable
}

package bus

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnectConfig holds the standard NATS connection options.
type ConnectConfig struct {
	// URL is one or more comma-separated server URLs. Defaults to
	// nats://127.0.0.1:4222.
	URL string
	// Name is the connection name shown by the server.
	Name string
	// Creds is a credentials file (JWT and seed).
	Creds string
	// NKey is an nkey seed file.
	NKey string
	// User and Password authenticate with a user/password pair; Token with a
	// token.
	User, Password, Token string
	// TLSCA, TLSCert and TLSKey configure TLS.
	TLSCA, TLSCert, TLSKey string
	// Timeout bounds the initial connection. Defaults to 5s.
	Timeout time.Duration
	// InboxPrefix replaces "_INBOX" in the connection's reply subjects
	// (WorkerInboxPrefix for workers). Empty keeps NATS's default.
	InboxPrefix string
}

// WorkerInboxPrefix is the inbox prefix of worker connections. A worker's
// NATS user may subscribe only to replies under it, so a worker never
// sees the replies of coordinators and clients on "_INBOX.>" (run headers
// holding run secrets among them).
const WorkerInboxPrefix = "_INBOX_worker"

// Connect connects to a NATS server and keeps reconnecting forever once
// connected.
func Connect(cfg ConnectConfig) (*nats.Conn, error) {
	url := cfg.URL
	if url == "" {
		url = nats.DefaultURL
	}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.Timeout(durationOr(cfg.Timeout, 5*time.Second)),
	}
	if cfg.Creds != "" {
		opts = append(opts, nats.UserCredentials(cfg.Creds))
	}
	if cfg.NKey != "" {
		o, err := nats.NkeyOptionFromSeed(cfg.NKey)
		if err != nil {
			return nil, fmt.Errorf("bus: nkey %s: %w", cfg.NKey, err)
		}
		opts = append(opts, o)
	}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	if cfg.TLSCert != "" || cfg.TLSKey != "" {
		if cfg.TLSCert == "" || cfg.TLSKey == "" {
			return nil, errors.New("bus: TLS needs both a certificate and a key")
		}
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	if cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect to %s: %w", url, err)
	}
	return nc, nil
}

func durationOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

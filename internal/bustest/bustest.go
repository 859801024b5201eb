// Package bustest starts a real embedded NATS server with JetStream for
// tests and opens a provisioned bus on it.
package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/manifold-run/manifold/bus"
)

// Start starts an embedded server with its store in t.TempDir() and a
// loopback listener on a random port, opens a bus with cfg and registers
// cleanup.
func Start(t testing.TB, cfg bus.Config) (*bus.Server, *bus.Bus) {
	t.Helper()
	srv, err := bus.StartServer(bus.ServerConfig{StoreDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	return srv, Open(t, srv, cfg)
}

// Open opens another connection and bus on srv, closed at cleanup.
func Open(t testing.TB, srv *bus.Server, cfg bus.Config) *bus.Bus {
	t.Helper()
	nc, err := srv.Connect(t.Name())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := bus.Open(ctx, nc, cfg)
	if err != nil {
		t.Fatalf("open bus: %v", err)
	}
	return b
}

// Command benchrun is manifold's benchmark harness; see package bench and
// `benchrun --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/manifold-run/manifold/e2e/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Command manifold is the one binary of manifold: CLI, embedded engine,
// and (with their commands) server, coordinator and worker.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/manifold-run/manifold/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

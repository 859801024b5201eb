package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/manifold-run/manifold/internal/ui"
)

// DefaultUIListen is where `manifold ui` listens by default: loopback.
const DefaultUIListen = "127.0.0.1:8089"

const uiAbout = `Serves a read-only web view of the fleet and its runs:
  /                 workers (host, pools, running tasks, last seen), the
                    convergence state of each assignment they keep, pools
                    and the newest runs
  /runs             runs, newest first; ?status=queued|running|succeeded|
                    failed|cancelled filters, ?limit=N (1 to 1000, default 50)
  /runs/RUN         one run: its resource graph coloured by status (SVG
                    drawn on the server), each resource's outcome, diff,
                    duration and error, child runs nested, and a link to the
                    trace in Jaeger with --jaeger-url; the page follows a
                    running run live (it polls every --poll)
Pages are rendered on the server; the stylesheet and the small script are
embedded (no CDN: it works offline). The server handles GET and HEAD only
and reads the bus with the credentials of any client (connection flags as
for status). It has no login of its own: it listens on loopback by default;
listen elsewhere only behind something that authenticates.
It prints the URL it serves on, then serves until interrupted.
Exit 0 when stopped by a signal, 2 for bad flags, 3 when it cannot listen or
reach the bus.`

func runUI(ctx context.Context, st IO, args []string) int {
	var (
		conn      connFlags
		listen    string
		jaegerURL string
		poll      time.Duration
	)
	fs := newFlags("ui", "[--listen ADDR] [--jaeger-url URL] [connection flags]", uiAbout, st, args)
	fs.StringVar(&listen, "listen", DefaultUIListen, "`ADDR` to serve on, host:port (port 0 picks a free one)")
	jaegerURLFlag(fs, st, &jaegerURL)
	fs.DurationVar(&poll, "poll", time.Second, "how often a running run's page refreshes (at least 100ms)")
	conn.register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(st.Stderr, "manifold ui: takes no arguments, got %q\n", pos)
		return ExitInvalid
	}
	if poll < 100*time.Millisecond {
		fmt.Fprintf(st.Stderr, "manifold ui: --poll %s: want at least 100ms\n", poll)
		return ExitInvalid
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold ui: --listen %s: %v\n", listen, err)
		return ExitInvalid
	}
	attachCtx, cancel := context.WithTimeout(ctx, remoteTimeout)
	b, err := conn.attach(attachCtx, st, "manifold-ui")
	cancel()
	if err != nil {
		return connExit(st, "ui", err)
	}
	defer b.Conn().Close()
	srv, err := ui.New(ui.Config{Bus: b, JaegerURL: jaegerURL, PollInterval: poll, Logger: newLogger(st.Stderr, "info")})
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold ui: %v\n", err)
		return ExitInvalid
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintf(st.Stderr, "manifold ui: %v\n", err)
		return ExitUnavailable
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && !ip.IsLoopback() || ip == nil && host != "localhost" {
		fmt.Fprintf(st.Stderr, "manifold ui: warning: listening on %s, not loopback: the view has no login; anyone who reaches it reads the fleet and its runs\n", l.Addr())
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	fmt.Fprintf(st.Stdout, "manifold ui: serving http://%s/\n", l.Addr())
	done := make(chan error, 1)
	go func() { done <- hs.Serve(l) }()
	select {
	case err := <-done:
		fmt.Fprintf(st.Stderr, "manifold ui: %v\n", err)
		return ExitUnavailable
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdown); err != nil {
		_ = hs.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(st.Stderr, "manifold ui: %v\n", err)
		return ExitUnavailable
	}
	return ExitOK
}

package coordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bustest"
)

// TestFanOutReportReadsChildrenAtOnce: the report of a finished fan-out of
// 240 hosts is read through a link with 10 ms of round trip (a proxy on
// loopback delaying each direction by 5 ms) in well under the 5 s given (0.4 s; 2.5 s with -race at load 23).
// Read one child after another (a record and a stored report each, three
// round trips or more) it takes 12 s: at 1,000 hosts the CLI's 10 s
// deadline passed before the report printed.
func TestFanOutReportReadsChildrenAtOnce(t *testing.T) {
	const hosts = 240
	srv, b := bustest.Start(t, bus.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	parent := &Report{RunID: "fan", Manifest: "site.yaml", Status: RunSucceeded}
	var g errgroup.Group
	g.SetLimit(16)
	for i := range hosts {
		id := fmt.Sprintf("fan-c%03d", i)
		parent.Resources = append(parent.Resources, ResourceReport{Ref: fmt.Sprintf("apply[host-%03d]", i), Status: "changed", ChildRunID: id})
		g.Go(func() error {
			return storeFinished(ctx, b, &record{V: bus.Version, RunID: id, RootRunID: "fan", ParentRunID: "fan", Depth: 1, Status: RunSucceeded},
				&Report{RunID: id, Status: RunSucceeded, Resources: []ResourceReport{{Ref: "file[/etc/motd]", Status: "changed"}}})
		})
	}
	require.NoError(t, g.Wait())
	require.NoError(t, storeFinished(ctx, b, &record{V: bus.Version, RunID: "fan", RootRunID: "fan", Status: RunSucceeded}, parent))

	far := openThrough(t, latencyProxy(t, srv.ClientURL(), 5*time.Millisecond))
	deadline, cancelRead := context.WithTimeout(ctx, 5*time.Second)
	defer cancelRead()
	start := time.Now()
	rep, err := GetReport(deadline, far, "fan")
	require.NoError(t, err, "after %v", time.Since(start))
	t.Logf("report of %d children in %v", hosts, time.Since(start))
	require.Len(t, rep.Resources, hosts)
	for i, r := range rep.Resources {
		require.NotNil(t, r.Child, "host %d", i)
		require.Equal(t, r.ChildRunID, r.Child.RunID)
		require.Equal(t, "file[/etc/motd]", r.Child.Resources[0].Ref)
	}
}

// storeFinished writes a finished run's record and report.
func storeFinished(ctx context.Context, b *bus.Bus, rec *record, rep *Report) error {
	data, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	if err := b.PutReport(ctx, rec.RunID, data); err != nil {
		return err
	}
	data, err = json.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = b.Runs().Put(ctx, runKey(rec.RunID), data)
	return err
}

// openThrough opens a bus on a connection to url.
func openThrough(t *testing.T, url string) *bus.Bus {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name(t.Name()))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b, err := bus.Open(ctx, nc, bus.Config{})
	require.NoError(t, err)
	return b
}

// latencyProxy forwards loopback TCP connections to target's host:port,
// each byte delivered delay after it was read (throughput is not limited:
// a link far away, not a slow one). It is closed at cleanup.
func latencyProxy(t *testing.T, target string, delay time.Duration) string {
	t.Helper()
	addr := strings.TrimPrefix(target, "nats://")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				_ = in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Go(func() { delayed(out, in, delay); _ = out.Close() })
			wg.Go(func() { delayed(in, out, delay); _ = in.Close() })
		}
	})
	return "nats://" + ln.Addr().String()
}

// delayed copies src to dst, each chunk written delay after it was read.
func delayed(dst io.Writer, src io.Reader, delay time.Duration) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	chunks := make(chan chunk, 4096)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- chunk{buf[:n], time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	})
	failed := false
	for c := range chunks {
		if failed {
			continue
		}
		if wait := time.Until(c.at); wait > 0 {
			t := time.NewTimer(wait) // the link's latency, not a wait for an event
			<-t.C
		}
		if _, err := dst.Write(c.b); err != nil {
			failed = true
		}
	}
}

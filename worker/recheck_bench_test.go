package worker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/resources/builtin"
	"github.com/manifold-run/manifold/schemas"
)

// BenchmarkIntervalCheck20k measures the interval check of a cached plan
// of 20,000 managed files (content and mode), all converged: the CPU time
// per file (user+system, from getrusage) beside the floor, a loop that
// only opens, fstats, reads and compares each file.
//
//	go test ./worker -run '^$' -bench IntervalCheck20k -benchtime 5x
func BenchmarkIntervalCheck20k(b *testing.B) {
	const n = 20000
	dir := b.TempDir()
	w := &Worker{cfg: Config{Registry: builtin.Registry(), Runner: nil}.WithDefaults(), log: slog.New(slog.DiscardHandler)}
	w.debts, _ = openDebts("")
	s := &assigner{w: w, log: w.log}
	p := &plan{Assignment: "bench", Version: 1}
	content := "managed content of a small configuration file\n"
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		path := filepath.Join(sub, fmt.Sprintf("f%05d.conf", i))
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
		p.Tasks = append(p.Tasks, bus.Task{RunID: "r", Task: i, Attempt: 1, Pool: "w", Resource: schemas.Resource{
			Type: "file", Name: path, Properties: map[string]any{"content": content, "mode": "0644"}}})
	}
	ctx := context.Background()
	start := time.Now()
	items := s.build(ctx, p)
	b.Logf("built %d resources in %s (once per plan)", len(items), time.Since(start))
	for _, it := range items {
		if it.err != nil {
			b.Fatal(it.err)
		}
	}
	r := &assignRunner{s: s}
	r.prepare(ctx, p) // once per plan, as the first interval check does
	var cpu, floor time.Duration
	for b.Loop() {
		c0 := cpuTime()
		drifted, stable := r.intervalCheck(ctx, p)
		cpu += cpuTime() - c0
		if len(drifted) != 0 || len(stable) != n {
			b.Fatalf("drifted %d, stable %d of %d", len(drifted), len(stable), n)
		}
		c0 = cpuTime()
		buf := make([]byte, 4096)
		for _, t := range p.Tasks {
			f, err := os.Open(t.Resource.Name)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Stat(); err != nil {
				b.Fatal(err)
			}
			k, _ := f.Read(buf)
			if string(buf[:k]) != content {
				b.Fatal("differs")
			}
			f.Close()
		}
		floor += cpuTime() - c0
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) / n }
	b.ReportMetric(per(cpu), "cpu-µs/file")
	b.ReportMetric(per(floor), "floor-cpu-µs/file")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

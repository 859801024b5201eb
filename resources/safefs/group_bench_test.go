package safefs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-run/manifold/resources/safefs"
)

// BenchmarkGroupStorm rewrites 10,000 files of 100 directories (a storm's
// repair) through Groups of safefs.MaxGroupFiles files, as a worker's file
// batches do: wall time per file until all are written (wall-µs/file) and
// until the files they replaced are released too (released-µs/file), and
// CPU per file, the releases' included.
func BenchmarkGroupStorm(b *testing.B) {
	const n = 10000
	dir := b.TempDir()
	dirs := make([]*safefs.Dir, 100)
	for i := range dirs {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i))
		if err := os.Mkdir(p, 0o755); err != nil {
			b.Fatal(err)
		}
		d, err := safefs.OpenDir(p)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		dirs[i] = d
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("f%05d", i)
	}
	data := [2][]byte{[]byte("managed\n"), []byte("storm!!\n")}
	var cpu, written time.Duration
	b.ResetTimer()
	for it := range b.N {
		c0, t0 := benchCPU(b), time.Now()
		var g safefs.Group
		for i, name := range names {
			if g.Len() == safefs.MaxGroupFiles {
				for _, err := range g.Commit() {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := g.Add(dirs[i%100], name, data[it%2], 0o644, -1, -1); err != nil {
				b.Fatal(err)
			}
		}
		for _, err := range g.Commit() {
			if err != nil {
				b.Fatal(err)
			}
		}
		written += time.Since(t0)
		safefs.WaitReleases()
		cpu += benchCPU(b) - c0
	}
	b.ReportMetric(float64(written.Microseconds())/float64(b.N*n), "wall-µs/file")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "released-µs/file")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*n), "cpu-µs/file")
}

func benchCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package compile

import (
	"fmt"
	"strings"
	"testing"
)

// benchManifest is e2e/bench's manifest of n files (CCM's block shape,
// a defaults entry, content templated from data, one exec); salt makes
// the text unique, so the parse cache does not answer.
func benchManifest(n, salt int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# %d\ndata:\n  greeting: hello\nccm:\n  resources:\n    - file:\n", salt)
	b.WriteString("        - defaults: {ensure: present, owner: nobody, group: nogroup, mode: \"0644\"}\n")
	for i := range n {
		fmt.Fprintf(&b, "        - /tmp/bench/f%06d.conf:\n            content: \"{{ lookup('data.greeting') }} from file %d\\n\"\n", i, i)
	}
	b.WriteString("    - exec:\n        - /usr/bin/touch /tmp/bench/marker:\n            creates: /tmp/bench/marker\n")
	return []byte(b.String())
}

// benchSalt numbers the manifests of every benchmark run.
var benchSalt int

// BenchmarkSourceBenchManifest is the compile of a converged apply and
// of validate: parse, data, names, references, properties, graph.
func BenchmarkSourceBenchManifest(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				benchSalt++
				src := benchManifest(n, benchSalt)
				b.StartTimer()
				p, err := Source("m.yaml", src, Opts{})
				if err != nil || len(p.Manifest.Resources) != n+1 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidateBenchManifest is BenchmarkSourceBenchManifest as
// `manifold validate` compiles: the parse is not stored in the cache.
func BenchmarkValidateBenchManifest(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				benchSalt++
				src := benchManifest(n, benchSalt)
				b.StartTimer()
				p, err := Source("m.yaml", src, Opts{ParseOnce: true})
				if err != nil || len(p.Manifest.Resources) != n+1 {
					b.Fatal(err)
				}
			}
		})
	}
}

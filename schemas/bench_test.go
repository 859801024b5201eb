package schemas

import (
	"fmt"
	"strings"
	"testing"
)

// flatManifest returns a YAML manifest of n flat file resources.
func flatManifest(n int) []byte {
	var b strings.Builder
	b.WriteString("resources:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {type: file, name: /srv/f%d, owner: app, mode: \"0644\", content: \"n={{ lookup('data.n') }}\"}\n", i)
	}
	return []byte(b.String())
}

func BenchmarkParse1000(b *testing.B) {
	src := flatManifest(1000)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		m, err := Parse("bench.yaml", src)
		if err != nil || len(m.Resources) != 1000 {
			b.Fatal(err)
		}
	}
}

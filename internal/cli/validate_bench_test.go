package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchManifestText is e2e/bench's manifest of n files: CCM's block shape,
// a defaults entry (ensure, owner, group, mode), content templated from
// data, one exec.
func benchManifestText(dir string, n int) string {
	var b strings.Builder
	b.WriteString("data:\n  greeting: hello\nccm:\n  resources:\n    - file:\n")
	b.WriteString("        - defaults: {ensure: present, owner: nobody, group: nogroup, mode: \"0644\"}\n")
	for i := range n {
		fmt.Fprintf(&b, "        - %s/f%06d.conf:\n            content: \"{{ lookup('data.greeting') }} from file %d\\n\"\n", dir, i, i)
	}
	fmt.Fprintf(&b, "    - exec:\n        - /usr/bin/touch %s/marker:\n            creates: %s/marker\n", dir, dir)
	return b.String()
}

// BenchmarkValidate is `manifold validate M` in process, facts gathered,
// of e2e/bench's manifest at 2,000 and 20,000 files (issue 21's sizes).
// The CPU of a whole process adds its start (`manifold version`); compare
// processes with /usr/bin/time, not this.
func BenchmarkValidate(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "manifest.yaml")
			if err := os.WriteFile(path, []byte(benchManifestText(filepath.Join(dir, "files"), n)), 0o644); err != nil {
				b.Fatal(err)
			}
			want := fmt.Sprintf("%s: valid, %d resources\n", path, n+1)
			var stdout, stderr bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				stdout.Reset()
				stderr.Reset()
				code := Run(context.Background(), IO{Stdout: &stdout, Stderr: &stderr}, []string{"validate", "--facts-dir", dir, path})
				if code != ExitOK || stdout.String() != want {
					b.Fatalf("exit %d, stdout %q, stderr %q; want 0, %q", code, stdout.String(), stderr.String(), want)
				}
			}
		})
	}
}

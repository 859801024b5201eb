package schemas

import (
	"io/fs"
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// The expressions the layout's scanners replace (readLayout).
var (
	typeLineRE = regexp.MustCompile(`(?m)^#types:\s*([A-Za-z_][A-Za-z0-9_]*)\s*:`)
	defLineRE  = regexp.MustCompile(`(?m)^(#[A-Za-z_][A-Za-z0-9_]*)\s*:`)
	defRefRE   = regexp.MustCompile(`#[A-Z][A-Za-z0-9_]*`)
)

func submatches(re *regexp.Regexp, src []byte) []string {
	var out []string
	for _, m := range re.FindAllSubmatch(src, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

func allMatches(re *regexp.Regexp, src []byte) []string {
	var out []string
	for _, m := range re.FindAll(src, -1) {
		out = append(out, string(m))
	}
	return out
}

func requireScannersMatch(t *testing.T, src []byte) {
	t.Helper()
	require.Equal(t, submatches(defLineRE, src), layoutLines(src, false), "definitions of %q", src)
	require.Equal(t, submatches(typeLineRE, src), layoutLines(src, true), "types of %q", src)
	require.Equal(t, allMatches(defRefRE, src), defRefs(src), "references of %q", src)
}

// TestLayoutScannersMatchRegexps: the scanners readLayout uses find what
// the regular expressions they replace find, in the same order: on every
// embedded schema, on edge cases (matches across lines, at the end of
// the text, back to back) and on random texts of the characters that
// matter.
func TestLayoutScannersMatchRegexps(t *testing.T) {
	names, err := fs.Glob(schemaFS, "*.cue")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	defs := 0
	for _, name := range names {
		src, err := schemaFS.ReadFile(name)
		require.NoError(t, err)
		requireScannersMatch(t, src)
		defs += len(layoutLines(src, false))
	}
	require.Greater(t, defs, 20, "the schemas' definitions were found")
	for _, src := range []string{
		"", "#", "#A", "#A:", "#a:", "#_x :", "#A\n:", "#A \n\t:\n#B:", "x#A:", " #A:", "#A:#B:\n#C:",
		"#types: file: #File\n#types:\n  exec:\n", "#types:", "#types: 9a:", "#types: a", "#types: a :",
		"##A:", "#AB#CD", "a#Bc_9#", "#A:\r\n#B :\n", "\n\n#Z9_:", "#types: a:\n#types: b:",
	} {
		requireScannersMatch(t, []byte(src))
	}
	alphabet := []byte("#:\n \tAaZz_9types")
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if r.IntN(4) == 0 {
			b = append([]byte("#types:"), b...)
		}
		requireScannersMatch(t, b)
	}
}

// BenchmarkReadLayout: the layout of the embedded schemas, read once per
// process.
func BenchmarkReadLayout(b *testing.B) {
	for b.Loop() {
		if _, err := readLayout(); err != nil {
			b.Fatal(err)
		}
	}
}

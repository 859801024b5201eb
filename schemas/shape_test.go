package schemas

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// parseBothWays parses src with and without deriving resources from their
// shapes.
func parseBothWays(t *testing.T, name string, src []byte) (with, without *Manifest, withErr, withoutErr error) {
	t.Helper()
	with, withErr = parseUnchecked(name, src)
	shapeCache = false
	defer func() { shapeCache = true }()
	without, withoutErr = parseUnchecked(name, src)
	return
}

// Deriving resources from a validated one of the same shape gives exactly
// what validating each with CUE gives: the same resources, and the same
// errors for the ones that differ in a constrained value.
func TestShapesGiveWhatValidationGives(t *testing.T) {
	var b strings.Builder
	b.WriteString("data: {greeting: hello}\nresources:\n  - file:\n")
	b.WriteString("      - defaults: {ensure: present, owner: nobody, group: nogroup, mode: \"0644\"}\n")
	for i := range 20 {
		fmt.Fprintf(&b, "      - /tmp/shape/f%d:\n          content: \"{{ lookup('data.greeting') }} %d\\n\"\n", i, i)
	}
	// Same labels, a constrained value that differs: each validated.
	b.WriteString("      - /tmp/shape/bad-mode:\n          mode: \"999\"\n")
	b.WriteString("      - /tmp/shape/dir:\n          ensure: directory\n")
	b.WriteString("      - /tmp/shape/bad-ensure:\n          ensure: sideways\n")
	b.WriteString("      - /tmp/shape/uid:\n          owner: 0\n")
	b.WriteString("      - /tmp/shape/neg-uid:\n          owner: -1\n")
	b.WriteString("      - /tmp/shape/both:\n          content: x\n          source: y\n")
	b.WriteString("      - /tmp/shape/both2:\n          content: z\n          source: w\n")
	for i := range 5 {
		fmt.Fprintf(&b, "  - {type: exec, name: \"echo %d\", timeout: \"%ds\", require: [\"file#/tmp/shape/f%d\"]}\n", i, i+1, i)
		fmt.Fprintf(&b, "  - {type: exec, name: \"true %d\", timeout: \"1s\", refreshonly: true}\n", i)
	}
	b.WriteString("  - {type: exec, name: \"bad timeout\", timeout: \"soon\"}\n")
	b.WriteString("  - {type: exec, name: \"unknown\", colour: blue}\n")
	cases := map[string][]byte{"generated.yaml": []byte(b.String())}
	for _, dir := range []string{"testdata/valid", "testdata/invalid", "../examples/hello"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, f := range files {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			cases[f] = src
		}
	}
	require.Greater(t, len(cases), 10)
	for name, src := range cases {
		with, without, withErr, withoutErr := parseBothWays(t, name, src)
		require.Equal(t, fmt.Sprint(withoutErr), fmt.Sprint(withErr), name)
		require.Equal(t, without, with, name)
	}
	_, _, err, _ := parseBothWays(t, "generated.yaml", cases["generated.yaml"])
	for _, want := range []string{"bad-mode", "bad-ensure", "neg-uid", "both", "both2", "resources[11].timeout", "colour"} {
		require.Contains(t, err.Error(), want)
	}
}

// A manifest of many resources of one shape is validated once: parsing
// 2,000 files costs little more than parsing a few.
func BenchmarkParseFilesOneShape(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchParseFiles(b, n) })
	}
}

func benchParseFiles(b *testing.B, n int) {
	var sb strings.Builder
	sb.WriteString("data: {greeting: hello}\nresources:\n  - file:\n")
	sb.WriteString("      - defaults: {ensure: present, owner: nobody, group: nogroup, mode: \"0644\"}\n")
	for i := range n {
		fmt.Fprintf(&sb, "      - /tmp/shape/f%06d.conf:\n          content: \"{{ lookup('data.greeting') }} from file %d\\n\"\n", i, i)
	}
	src := []byte(sb.String())
	for _, on := range []bool{true, false} {
		if !on && n > 2000 {
			continue
		}
		b.Run(fmt.Sprintf("shapes=%v", on), func(b *testing.B) {
			shapeCache = on
			defer func() { shapeCache = true }()
			for b.Loop() {
				if _, err := parseUnchecked("m.yaml", src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Lists of references (require, subscribe) are part of a resource's shape
// as lists of strings: a chain of files each requiring the one before it
// is validated with CUE once per shape, not once per resource (20,000
// CUE unifications took 5.6 s of a 7.7 s validate), and gives what
// validating each resource gives.
func TestReferenceListsShareAShape(t *testing.T) {
	var b strings.Builder
	b.WriteString("ordering: graph\nresources:\n  - file:\n")
	b.WriteString("      - defaults: {ensure: present, mode: \"0644\"}\n")
	for i := range 40 {
		fmt.Fprintf(&b, "      - /tmp/chain/f%d:\n          content: \"%d\"\n", i, i)
		switch {
		case i == 0:
		case i%2 == 0:
			fmt.Fprintf(&b, "          require: [\"file#/tmp/chain/f%d\", \"file#/tmp/chain/f0\"]\n", i-1)
		default:
			fmt.Fprintf(&b, "          require:\n            - file#/tmp/chain/f%d\n          subscribe: []\n", i-1)
		}
	}
	for i := range 10 {
		fmt.Fprintf(&b, "  - {type: exec, name: \"echo %d\", subscribe: [\"file#/tmp/chain/f%d\"], refreshonly: true}\n", i, i)
	}
	src := []byte(b.String())
	validated := -1
	fastParsed = func(n int) {
		if validated < 0 { // the first parse, with shapes
			validated = n
		}
	}
	defer func() { fastParsed = nil }()
	with, without, withErr, withoutErr := parseBothWays(t, "chain.yaml", src)
	require.NoError(t, withErr)
	require.NoError(t, withoutErr)
	require.Equal(t, without, with)
	require.Len(t, with.Resources, 50)
	// f0; f1, f3, ... (require, subscribe); f2, f4, ... (require); the execs.
	require.Equal(t, 4, validated, "resources validated with CUE")
	require.Equal(t, []string{"file#/tmp/chain/f3", "file#/tmp/chain/f0"}, with.Resources[4].Require)
	require.Equal(t, []string{}, with.Resources[3].Subscribe)
	// Each resource owns its lists: rendering or cleaning one touches no other.
	with.Resources[2].Require[0] = "changed"
	require.Equal(t, "file#/tmp/chain/f3", with.Resources[4].Require[0])

	// A reference that is not a string is the schema's to report.
	bad := strings.Replace(string(src), `require: ["file#/tmp/chain/f3", "file#/tmp/chain/f0"]`, `require: ["file#/tmp/chain/f3", 7]`, 1)
	with, without, withErr, withoutErr = parseBothWays(t, "chain.yaml", []byte(bad))
	require.Error(t, withErr)
	require.Equal(t, fmt.Sprint(withoutErr), fmt.Sprint(withErr))
	require.Contains(t, withErr.Error(), "chain.yaml:22:43: resources[0].file[5]./tmp/chain/f4.require[1]: conflicting values 7 and string")
}

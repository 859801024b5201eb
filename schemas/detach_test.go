package schemas

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// conflict matches CUE's conflict messages, whose two operands come in
// an order that depends on how the values were built.
var conflict = regexp.MustCompile(`conflicting values (.+?) and (.+?) \(mismatched types (\w+) and (\w+)\)`)

// sameConflicts writes every conflict message with its operands sorted.
func sameConflicts(s string) string {
	return conflict.ReplaceAllStringFunc(s, func(m string) string {
		g := conflict.FindStringSubmatch(m)
		if g[1] > g[2] {
			g[1], g[2], g[3], g[4] = g[2], g[1], g[4], g[3]
		}
		return fmt.Sprintf("conflicting values %s and %s (mismatched types %s and %s)", g[1], g[2], g[3], g[4])
	})
}

// Building the resources list's entries apart gives what building the
// whole document gives: the same resources, and the same errors at the
// same file, line, column and path, in YAML and JSON, in both shapes.
func TestDetachedListsGiveWhatTheDocumentGives(t *testing.T) {
	var b strings.Builder
	b.WriteString("ccm:\n  resources:\n  - file:\n      - defaults: {ensure: present, mode: \"0644\"}\n")
	for i := range 30 {
		fmt.Fprintf(&b, "      - /tmp/detach/f%d:\n          content: \"%d\\n\"\n", i, i)
	}
	b.WriteString("      - /tmp/detach/bad:\n          mode: 644\n          ownr: x\n")
	b.WriteString("      - notamap\n")
	b.WriteString("  - {type: exec, name: one, timeout: soon}\n")
	b.WriteString("  - exec:\n  - nosuchtype:\n      - x: {}\n")
	cases := map[string][]byte{
		"generated.yaml": []byte(b.String()),
		"flat.json":      []byte(`{"resources": [{"type": "file", "name": "/tmp/j", "content": "x"}, {"file": [{"/tmp/k": {"mode": 7}}]}]}`),
		"notalist.yaml":  []byte("resources: {file: x}\nccm: {resources: []}\n"),
		"empty.yaml":     []byte("resources: []\n"),
		"single.yaml":    []byte("resources:\n  - package: {name: sl, ensure: \"5.9\"}\n  - package: {sl: {}}\n  - package:\n      name: x\n      ensrue: y\n"),
	}
	for _, dir := range []string{"testdata/valid", "testdata/invalid", "../examples/hello", "../examples/cue"} {
		for _, pattern := range []string{"*.yaml", "*.json"} {
			files, _ := filepath.Glob(filepath.Join(dir, pattern))
			for _, f := range files {
				src, err := os.ReadFile(f)
				require.NoError(t, err)
				cases[f] = src
			}
		}
	}
	require.Greater(t, len(cases), 12)
	detachMin = 0 // every list is built apart
	defer func() { detachMin = 2500 }()
	for name, src := range cases {
		apart, apartErr := parseUnchecked(name, src)
		detachLists = false
		whole, wholeErr := parseUnchecked(name, src)
		detachLists = true
		require.Equal(t, sameConflicts(fmt.Sprint(wholeErr)), sameConflicts(fmt.Sprint(apartErr)), name)
		require.Equal(t, whole, apart, name)
	}
	_, err := parseUnchecked("generated.yaml", cases["generated.yaml"])
	for _, want := range []string{"generated.yaml:", "bad.ownr", "bad.mode", "file[32]", "timeout", "nosuchtype"} {
		require.Contains(t, err.Error(), want)
	}
}

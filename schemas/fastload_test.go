package schemas

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"cuelang.org/go/cue/cuecontext"
	cueyaml "cuelang.org/go/encoding/yaml"
	"github.com/stretchr/testify/require"
)

// yamlCorpus gathers YAML manifests: the repository's YAML files, the
// yaml blocks of the README and docs/, and generated ones in every shape.
func yamlCorpus(t testing.TB) map[string][]byte {
	cases := map[string][]byte{}
	_ = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml":
			if src, err := os.ReadFile(path); err == nil && len(src) < 1<<20 {
				cases[path] = src
			}
		case ".md":
			src, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			for i, m := range yamlBlock.FindAllSubmatch(src, -1) {
				cases[fmt.Sprintf("%s#%d.yaml", path, i)] = m[1]
			}
		}
		return nil
	})
	var b strings.Builder
	b.WriteString("# a manifest\ndata:\n  greeting: hello\n  n: 3\n  list: [a, 'b', \"c\\n\", 1, true, null]\n  nested:\n    deep: {x: 1, y: [1, 2]}\n    empty:\n")
	b.WriteString("ordering: graph\nfail_on_error: true\nccm:\n  resources:\n    - file:\n        - defaults: {ensure: present, owner: nobody, group: nogroup, mode: \"0644\"}\n")
	for i := range 40 {
		fmt.Fprintf(&b, "        - /tmp/fast/f%03d.conf:\n            content: \"{{ lookup('data.greeting') }} from file %d\\n\"\n", i, i)
		if i%7 == 3 {
			fmt.Fprintf(&b, "            require: [\"file#/tmp/fast/f%03d.conf\"]\n", i-1)
		}
		if i%11 == 5 {
			b.WriteString("            mode: '0600'   # private\n")
		}
	}
	b.WriteString("    - exec:\n        - /usr/bin/touch /tmp/fast/marker:\n            creates: /tmp/fast/marker\n            timeout: 30s\n")
	b.WriteString("    - package: {name: sl, ensure: latest}\n")
	b.WriteString("    - service:\n        name: cron\n        ensure: running\n")
	cases["generated-block.yaml"] = []byte(b.String())
	cases["generated-flat.yaml"] = []byte(`resources:
- type: file
  name: /tmp/flat/a
  content: "a"
  owner: root
- {type: file, name: /tmp/flat/b, content: b, mode: "0755"}
-   type: exec
    name: "echo hi"
    control:
      if: "{{ true }}"
    health_checks:
      - command: /bin/true
        tries: 2
    retry: 3
- type: file
  name: '/tmp/flat/it''s'
  ensure: absent
defaults:
  file: {owner: nobody}
hierarchy:
  order: ["os:{{ lookup('facts.os') }}"]
overrides:
  "os:linux": {greeting: hi}
pre_message: "starting {{ lookup('data.greeting') }}"
`)
	cases["generated-edge.yaml"] = []byte("resources:\n  - file:\n    - /tmp/e/a:\n    - /tmp/e/b: {}\n    - \"/tmp/e/c\":\n        content: \"\\u00e9t\\u00e9 \\\"q\\\"\"\n    - /tmp/e/d: {content: 'x: y', mode: \"0644\"}\n  - exec: []\n  - package:\n")
	cases["generated-literal.yaml"] = []byte("data:\n  motd: |\n    Welcome\n\n      indented # not a comment\n    end\n\n  strip: |-\n    no newline\nresources:\n  - file:\n    - /tmp/l/a:\n        content: |\n          line 1\n          line 2\n        mode: \"0644\"\n    - /tmp/l/b:\n        content: |-   # stripped\n          x\n  # a comment\n  - exec:\n    - echo:\n        command: |\n          echo hi\n")
	cases["generated-dup.yaml"] = []byte("resources:\n  - file:\n    - /tmp/d/a:\n        content: a\n        content: b\n")
	cases["generated-numbers.yaml"] = []byte("data:\n  a: 0644\n  b: 1.5\n  c: 1e3\n  d: 0x1f\n  e: .inf\n  f: 2001-12-14\n  g: -7\n  h: 30s\n  i: yes\n  j: ~\nresources: []\n")
	cases["generated-tags.yaml"] = []byte("data:\n  a: &x 1\n  b: *x\n  c: !!str 3\n  d: >\n    text\n  e: |+\n    kept\n\nresources: []\n")
	cases["generated-errors.yaml"] = []byte("resources:\n  - file:\n    - /tmp/x:\n        mode: 644\n        ownr: x\n  - nosuch: []\n  - {type: exec, name: one, timeout: soon}\n")
	return cases
}

var yamlBlock = regexp.MustCompile("(?s)```ya?ml\n(.*?)```")

// mutations returns variants of src with one line dropped, indented or
// cut, which exercise the subset reader's refusals and the loader's errors.
func mutations(src []byte) [][]byte {
	lines := strings.Split(string(src), "\n")
	var out [][]byte
	for i := 0; i < len(lines) && i < 20; i++ {
		drop := append(append([]string{}, lines[:i]...), lines[i+1:]...)
		out = append(out, []byte(strings.Join(drop, "\n")))
		ind := append([]string{}, lines...)
		ind[i] = " " + ind[i]
		out = append(out, []byte(strings.Join(ind, "\n")))
		cut := append([]string{}, lines...)
		cut[i] = cut[i][:len(cut[i])/2]
		out = append(out, []byte(strings.Join(cut, "\n")))
	}
	return out
}

// The fast path returns exactly what the full path returns, for every
// manifest it takes; the others (invalid ones included) it leaves to the
// full path, whose errors are the contract.
func TestFastPathMatches(t *testing.T) {
	corpus := yamlCorpus(t)
	require.Greater(t, len(corpus), 40)
	taken, total := 0, 0
	s, err := newSchema()
	require.NoError(t, err)
	check := func(name string, src []byte) {
		total++
		fast, ok := parseFast(s, "m.yaml", src)
		if !ok {
			return
		}
		taken++
		fastPath = false
		full, ferr := parseUnchecked("m.yaml", src)
		fastPath = true
		require.NoError(t, ferr, "%s: the fast path took a manifest the full path refuses:\n%s", name, src)
		require.Equal(t, full, fast, "%s:\n%s", name, src)
	}
	for name, src := range corpus {
		check(name, src)
		if strings.HasPrefix(name, "generated") {
			for i, m := range mutations(src) {
				check(fmt.Sprintf("%s mutation %d", name, i), m)
			}
		}
	}
	t.Logf("fast path took %d of %d manifests", taken, total)
	require.Greater(t, taken, 60)
	for _, name := range []string{"generated-block.yaml", "generated-flat.yaml", "generated-edge.yaml", "generated-literal.yaml"} {
		_, ok := parseFast(s, "m.yaml", corpus[name])
		require.True(t, ok, "%s should take the fast path", name)
	}
	for _, name := range []string{"generated-dup.yaml", "generated-numbers.yaml", "generated-tags.yaml", "generated-errors.yaml"} {
		_, ok := parseFast(s, "m.yaml", corpus[name])
		require.False(t, ok, "%s should take the full path", name)
	}
}

// What the subset reader accepts it reads as yaml.v3 and CUE's YAML
// decoder do, value for value.
func TestSubsetMatchesYAML(t *testing.T) {
	n := 0
	for name, src := range yamlCorpus(t) {
		for i, s := range append([][]byte{src}, mutations(src)...) {
			if subsetAgrees(t, fmt.Sprintf("%s/%d", name, i), s) {
				n++
			}
		}
	}
	require.Greater(t, n, 100)
}

func FuzzSubsetMatchesYAML(f *testing.F) {
	for _, src := range yamlCorpus(f) {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) { subsetAgrees(t, "fuzz", src) })
}

// subsetAgrees compares the subset reader's reading of src with CUE's,
// when the subset reader takes it; it reports whether it did.
func subsetAgrees(t *testing.T, name string, src []byte) bool {
	root, ok := parseSubset(src)
	if !ok {
		return false
	}
	f, err := cueyaml.Extract("m.yaml", src)
	require.NoError(t, err, "%s: the subset took what yaml.v3 refuses:\n%s", name, src)
	v := cuecontext.New().BuildFile(f)
	require.NoError(t, v.Err(), "%s", name)
	var want any
	require.NoError(t, v.Decode(&want), "%s", name)
	wj, err := json.Marshal(want)
	require.NoError(t, err)
	gj, err := json.Marshal(plain(root))
	require.NoError(t, err)
	require.JSONEq(t, string(wj), string(gj), "%s:\n%s", name, src)
	return true
}

// plain turns a subset node into Go values.
func plain(n *ynode) any {
	switch n.kind {
	case ymap:
		m := map[string]any{}
		for i, k := range n.keys {
			m[k.val.(string)] = plain(n.vals[i])
		}
		return m
	case yseq:
		l := []any{}
		for _, it := range n.vals {
			l = append(l, plain(it))
		}
		return l
	}
	return n.val
}

// benchManifest is e2e/bench's manifest of n files: CCM's block shape, a
// defaults entry, content templated from data, one exec.
func benchManifest(n int) []byte {
	var b strings.Builder
	b.WriteString("data:\n  greeting: hello\nccm:\n  resources:\n    - file:\n")
	b.WriteString("        - defaults: {ensure: present, owner: nobody, group: nogroup, mode: \"0644\"}\n")
	for i := range n {
		fmt.Fprintf(&b, "        - /tmp/bench/f%06d.conf:\n            content: \"{{ lookup('data.greeting') }} from file %d\\n\"\n", i, i)
	}
	b.WriteString("    - exec:\n        - /usr/bin/touch /tmp/bench/marker:\n            creates: /tmp/bench/marker\n")
	return []byte(b.String())
}

// The fast path costs a bounded number of allocations per resource (the
// full path made some 170): the difference between 2,000 and 4,000
// files, over 2,000.
func TestFastPathAllocationsPerResource(t *testing.T) {
	small, big := benchManifest(2000), benchManifest(4000)
	allocs := func(src []byte) float64 {
		return testing.AllocsPerRun(3, func() {
			m, err := parseUnchecked("m.yaml", src)
			if err != nil || len(m.Resources) < 2000 {
				t.Fatal(err)
			}
		})
	}
	per := (allocs(big) - allocs(small)) / 2000
	t.Logf("%.1f allocations per resource", per)
	require.Less(t, per, 14.0)
}

// BenchmarkParseBenchManifest parses e2e/bench's manifest on the fast
// path (its items made into resources on a second goroutine or not) and
// on the full one.
func BenchmarkParseBenchManifest(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		src := benchManifest(n)
		for _, mode := range []string{"fast", "fast-one-goroutine", "full"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, mode), func(b *testing.B) {
				fastPath, asyncItemsOn = mode != "full", mode == "fast"
				defer func() { fastPath, asyncItemsOn = true, true }()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := parseUnchecked("m.yaml", src); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// The items of block entries, made into resources as they are read
// (their nodes reused), give what the tree gives and what the full path
// gives: block defaults, several entries among flat ones, ccm.resources,
// manifest-level defaults before or after the list (parsed again without
// streaming), an item the fast path cannot take, big property maps,
// nested collections.
func TestStreamedItemsMatch(t *testing.T) {
	var big strings.Builder
	big.WriteString("resources:\n  - file:\n      - defaults: {mode: \"0600\"}\n")
	for i := range 300 {
		fmt.Fprintf(&big, "      - /tmp/s/f%d:\n          content: \"%d\"\n          require: [\"file#/tmp/s/f0\"]\n", i, i)
		if i == 150 {
			big.WriteString("      - defaults: {mode: \"0644\", owner: nobody}\n")
		}
	}
	var wide strings.Builder
	wide.WriteString("resources:\n  - exec:\n      - /bin/true:\n          environment:\n")
	for i := range 40 {
		fmt.Fprintf(&wide, "            - K%d=v\n", i)
	}
	wide.WriteString("          health_checks:\n            - {command: /bin/true, name: ok}\n      - /bin/false: {}\n")
	cases := map[string]string{
		"big":  big.String(),
		"wide": wide.String(),
		"mixed": `resources:
  - {type: file, name: /tmp/a, content: a}
  - file:
      - /tmp/b: {content: b}
      -
        /tmp/c:
          content: c
  - exec:
      - echo: {command: /bin/echo}
  - package:
      - nginx: {}
  - file:
      - /tmp/d:
`,
		"ccm":            "ccm:\n  resources:\n    - file:\n        - /tmp/x: {content: x}\n        - /tmp/y: {content: y}\n",
		"defaults first": "defaults:\n  file: {owner: app}\nresources:\n  - file:\n      - /tmp/x: {content: x}\n",
		"defaults after": "resources:\n  - file:\n      - /tmp/x: {content: x}\ndefaults:\n  file: {owner: app, mode: \"0600\"}\n",
		"ccm defaults":   "ccm:\n  resources:\n    - file:\n        - /tmp/x: {content: x}\n  defaults:\n    file: {owner: app}\n",
		"required from defaults": `resources:
  - exec:
      - echo: {}
defaults:
  exec: {command: /bin/echo}
`,
		"bad item":   "resources:\n  - file:\n      - /tmp/x: {content: x}\n      - /tmp/y: {mdoe: \"0644\"}\n      - /tmp/z: {content: z}\n",
		"item shape": "resources:\n  - file:\n      - /tmp/x: {content: x}\n      - just a string\n",
		"flat list":  "resources:\n  - type: file\n    name: /tmp/x\n    require:\n      - file#/tmp/y\n  - file:\n      - /tmp/y: {content: y}\n",
	}
	s, err := newSchema()
	require.NoError(t, err)
	for name, src := range cases {
		streamed, sok := parseFast(s, "m.yaml", []byte(src))
		streamItems = false
		tree, tok := parseFast(s, "m.yaml", []byte(src))
		streamItems = true
		require.Equal(t, tok, sok, name)
		require.Equal(t, tree, streamed, name)
		fastPath = false
		full, ferr := parseUnchecked("m.yaml", []byte(src))
		fastPath = true
		if sok {
			require.NoError(t, ferr, name)
			require.Equal(t, full, streamed, name)
		}
	}
	for _, name := range []string{"big", "wide", "mixed", "ccm", "defaults first", "defaults after", "ccm defaults", "required from defaults", "flat list"} {
		_, ok := parseFast(s, "m.yaml", []byte(cases[name]))
		require.True(t, ok, "%s should take the fast path", name)
	}
}

// Streaming a block's items reuses their nodes: a 2,000-file block
// parses in less than three quarters of the bytes it takes with its tree
// (2.5 against 3.7 MB).
func TestStreamedItemsSpareTheTree(t *testing.T) {
	var b strings.Builder
	b.WriteString("data: {greeting: hello}\nresources:\n  - file:\n")
	b.WriteString("      - defaults: {ensure: present, owner: nobody, group: nogroup, mode: \"0644\"}\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "      - /tmp/s/f%06d.conf:\n          content: \"{{ lookup('data.greeting') }} from file %d\\n\"\n", i, i)
	}
	src := []byte(b.String())
	s, err := newSchema()
	require.NoError(t, err)
	bytesOf := func(stream bool) uint64 {
		streamItems = stream
		defer func() { streamItems = true }()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, ok := parseFast(s, "m.yaml", src)
		runtime.ReadMemStats(&after)
		require.True(t, ok)
		return after.TotalAlloc - before.TotalAlloc
	}
	bytesOf(true) // the shapes' CUE values, once
	streamed, tree := bytesOf(true), bytesOf(false)
	t.Logf("2,000 files: %d bytes streamed, %d with the tree", streamed, tree)
	require.Less(t, streamed, tree*3/4)
}

// countSink takes every item of the exec blocks.
type countSink struct{ n int }

func (c *countSink) blockType(key string) bool { return key == "exec" }
func (c *countSink) item(_ *ynode, _ bool, _ int, _ string, _, _ int, _ *ynode) bool {
	c.n++
	return true
}

// Items bigger than what is left of a chunk of nodes (here some 255
// nodes each, of a chunk's 256) do not take a new chunk each: the reader goes on in the
// chunk the item overflowed into, and streaming reads in far fewer bytes
// than the tree.
func TestStreamedBigItems(t *testing.T) {
	var b strings.Builder
	b.WriteString("resources:\n  - exec:\n")
	for i := range 200 {
		fmt.Fprintf(&b, "      - /bin/echo %d:\n          environment:\n", i)
		for k := range 250 {
			fmt.Fprintf(&b, "            - K%d=%d\n", k, i)
		}
	}
	src := []byte(b.String())
	bytesOf := func(sink itemSink) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, ok := parseSubsetTo(src, sink)
		runtime.ReadMemStats(&after)
		require.True(t, ok)
		return after.TotalAlloc - before.TotalAlloc
	}
	sink := &countSink{}
	streamed, tree := bytesOf(sink), bytesOf(nil)
	require.Equal(t, 200, sink.n)
	t.Logf("200 items of 250 list entries: %d bytes streamed, %d with the tree", streamed, tree)
	require.Less(t, streamed, tree/2)
}

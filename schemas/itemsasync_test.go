package schemas

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// bigBlocks is a manifest of n files in block entries of per files each,
// with block defaults changed half way through each block, requires and
// templates; tail is appended to it.
func bigBlocks(n, per int, ccm bool, tail string) string {
	var b strings.Builder
	ind := "  "
	if ccm {
		b.WriteString("data: {greeting: hello}\nccm:\n  resources:\n")
		ind = "    "
	} else {
		b.WriteString("data: {greeting: hello}\nresources:\n")
	}
	for i := range n {
		if i%per == 0 {
			if i > 0 {
				fmt.Fprintf(&b, "%s- {type: exec, name: between-%d, command: /bin/true}\n", ind, i)
			}
			fmt.Fprintf(&b, "%s- file:\n%s    - defaults: {ensure: present, owner: nobody, mode: \"0644\"}\n", ind, ind)
		}
		if i%per == per/2 {
			fmt.Fprintf(&b, "%s    - defaults: {ensure: present, owner: root, mode: \"0600\"}\n", ind)
		}
		fmt.Fprintf(&b, "%s    - /tmp/async/f%06d.conf:\n%s        content: \"{{ lookup('data.greeting') }} from file %d\\n\"\n", ind, i, ind, i)
		if i%97 == 3 {
			fmt.Fprintf(&b, "%s        require: [\"file#/tmp/async/f%06d.conf\"]\n", ind, i-1)
		}
	}
	b.WriteString(tail)
	return b.String()
}

// The items of a manifest past asyncItemsBytes are made into resources
// on a second goroutine (asyncItems); what the fast path returns is what
// it returns with one goroutine, item for item, position for position,
// for manifests it takes and for those it gives up (an invalid item late
// in a block, an item of the wrong shape, manifest-level defaults after
// the list, which are parsed again without streaming).
func TestAsyncItemsMatch(t *testing.T) {
	const n = 6000
	bad := strings.Replace(bigBlocks(n, 2500, false, ""), "/tmp/async/f005500.conf:\n", "/tmp/async/f005500.conf:\n        mdoe: \"0644\"\n", 1)
	shape := strings.Replace(bigBlocks(n, 2500, false, ""), "    - /tmp/async/f004000.conf:\n", "    - just a string\n    - /tmp/async/f004000.conf:\n", 1)
	cases := map[string]struct {
		src  string
		fast bool
	}{
		"one block":      {bigBlocks(n, n, false, ""), true},
		"blocks":         {bigBlocks(n, 2500, false, ""), true},
		"ccm":            {bigBlocks(n, 2500, true, ""), true},
		"defaults after": {bigBlocks(n, 2500, false, "defaults:\n  file: {group: root}\n"), true},
		"bad item":       {bad, false},
		"item shape":     {shape, false},
	}
	s, err := newSchema()
	require.NoError(t, err)
	for name, c := range cases {
		require.GreaterOrEqual(t, len(c.src), asyncItemsBytes, "%s: too small for the second goroutine", name)
		async, aok := parseFast(s, "m.yaml", []byte(c.src))
		asyncItemsOn = false
		one, ook := parseFast(s, "m.yaml", []byte(c.src))
		asyncItemsOn = true
		require.Equal(t, c.fast, aok, "%s: taken by the fast path", name)
		require.Equal(t, ook, aok, name)
		require.Equal(t, one, async, name)
		if aok {
			require.Len(t, async.Resources, n+strings.Count(c.src, "between-"), name)
		}
	}
	// And what the full path returns.
	src := []byte(cases["blocks"].src)
	async, ok := parseFast(s, "m.yaml", src)
	require.True(t, ok)
	fastPath = false
	full, err := parseUnchecked("m.yaml", src)
	fastPath = true
	require.NoError(t, err)
	require.Equal(t, full, async)
}

// A loader that refuses an item stops the reader at its next item, and
// wait says the items were not all taken.
func TestAsyncItemsStop(t *testing.T) {
	src := []byte(bigBlocks(6000, 6000, false, ""))
	inner := &refusingSink{at: 100}
	a := newAsyncItems(inner)
	handed := &countingSink{to: a}
	_, ok := parseSubsetTo(src, handed)
	require.False(t, a.wait(), "the loader refused an item: wait says so")
	require.False(t, ok, "the reader was not stopped")
	require.Equal(t, 101, inner.seen, "the loader was handed items after the one it refused")
	require.Less(t, handed.n, 6000, "the reader went on to the end after the refusal")
}

// refusingSink refuses its at-th item (0-based), counting those it saw.
type refusingSink struct{ at, seen int }

func (r *refusingSink) blockType(key string) bool { return key == "file" }
func (r *refusingSink) item(_ *ynode, _ bool, _ int, _ string, _, _ int, item *ynode) bool {
	r.seen++
	if item.kind != ymap || len(item.keys) != 1 {
		panic("an item's copy is not its node")
	}
	return r.seen <= r.at
}

// countingSink counts the items the reader hands on.
type countingSink struct {
	to itemSink
	n  int
}

func (c *countingSink) blockType(key string) bool { return c.to.blockType(key) }
func (c *countingSink) item(seq *ynode, ccm bool, entry int, typ string, j, left int, item *ynode) bool {
	c.n++
	return c.to.item(seq, ccm, entry, typ, j, left, item)
}

// A loader that panics has the panic come out of wait, in the reader's
// goroutine, once the reader stopped: as a synchronous sink's would.
func TestAsyncItemsPanicReachesTheReader(t *testing.T) {
	src := []byte(bigBlocks(6000, 6000, false, ""))
	a := newAsyncItems(&panickingSink{at: 10})
	_, ok := parseSubsetTo(src, a)
	require.False(t, ok, "the reader was not stopped")
	defer func() {
		r := recover()
		require.NotNil(t, r, "no panic out of wait")
		require.Contains(t, fmt.Sprint(r), "loader bug at item 10")
		require.Contains(t, fmt.Sprint(r), "the loader's goroutine")
	}()
	a.wait()
}

// panickingSink panics at its at-th item.
type panickingSink struct{ at, seen int }

func (p *panickingSink) blockType(key string) bool { return key == "file" }
func (p *panickingSink) item(_ *ynode, _ bool, _ int, _ string, _, _ int, _ *ynode) bool {
	p.seen++
	if p.seen > p.at {
		panic(fmt.Sprintf("loader bug at item %d", p.at))
	}
	return true
}

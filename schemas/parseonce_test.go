package schemas

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// parseOnceRuns numbers the runs of TestParseOnceIsNotStored.
var parseOnceRuns int

// ParseOnce answers from the parse cache but does not store there: a
// validate parses its manifest once, and storing it would copy every
// resource.
func TestParseOnceIsNotStored(t *testing.T) {
	parseOnceRuns++ // a new text at each run (-count): the cache is the process's
	src := []byte(fmt.Sprintf("# %d\nresources:\n  - file:\n      - /tmp/parse-once-test: {ensure: present}\n", parseOnceRuns))
	key := parseKey("once.yaml", src)
	stored := func() bool {
		parseCache.mu.Lock()
		defer parseCache.mu.Unlock()
		_, ok := parseCache.items[key]
		return ok
	}
	m, err := ParseOnce("once.yaml", src)
	require.NoError(t, err)
	require.Len(t, m.Resources, 1)
	require.False(t, stored(), "ParseOnce stored its result")

	m2, err := ParseUnchecked("once.yaml", src)
	require.NoError(t, err)
	require.True(t, stored())
	m3, err := ParseOnce("once.yaml", src)
	require.NoError(t, err)
	require.Equal(t, m2, m3)
	require.Equal(t, m.Resources[0].Name, m3.Resources[0].Name)
	m3.Resources[0].Name = "changed"
	m4, err := ParseOnce("once.yaml", src)
	require.NoError(t, err)
	require.Equal(t, "/tmp/parse-once-test", m4.Resources[0].Name, "a cached result is handed out as a copy")
}

// The subset reader makes some five nodes per resource of e2e/bench's
// manifest: a node is kept at 88 bytes (offsets and positions as int32, a
// sequence's items in vals); it was 128.
func TestSubsetNodeSize(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(ynode{}), uintptr(88))
}

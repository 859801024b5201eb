package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime/metrics"
	"strings"
	"testing"
)

// TestAdviseHugeHeap: the block is advised for huge pages in whole 2 MiB
// pages (the kernel marks its mapping "hg") and is freed again: the heap's
// objects do not keep it.
func TestAdviseHugeHeap(t *testing.T) {
	if !hugePagesAdvised() {
		b, _ := os.ReadFile(thpEnabled)
		t.Skipf("transparent huge pages are not in madvise mode here (%s: %q): nothing to advise", thpEnabled, strings.TrimSpace(string(b)))
	}
	const size = 9 << 20
	before := heapObjects()
	start, n := adviseHugeHeap(size)
	if n < size-2*hugePage || n%hugePage != 0 || start%hugePage != 0 {
		t.Fatalf("advised %d bytes at %#x of a %d-byte block; want whole huge pages, at least %d bytes", n, start, size, size-2*hugePage)
	}
	flags, err := vmFlags(start)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("the mapping at %#x has VmFlags %q, want hg (MADV_HUGEPAGE)", start, flags)
	}
	if after := heapObjects(); after > before+size/2 {
		t.Errorf("heap objects %d bytes after, %d before: the block was not freed", after, before)
	}
}

// vmFlags is the VmFlags line of the mapping of /proc/self/smaps holding
// addr.
func vmFlags(addr uintptr) (string, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return "", err
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= addr && addr < hi
			continue
		}
		if in {
			if v, ok := strings.CutPrefix(line, "VmFlags:"); ok {
				return strings.TrimSpace(v), nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no mapping of /proc/self/smaps holds %#x", addr)
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

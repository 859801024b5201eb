package main

import (
	"bytes"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// thpEnabled is the kernel's transparent huge page setting.
const thpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"

// hugePage is the size of a transparent huge page on the platforms Go
// runs Linux on with 4 KiB pages (x86-64, arm64 with 4 KiB granules).
const hugePage = 2 << 20

// hugePagesAdvised reports whether the kernel backs anonymous memory
// with huge pages only where madvise(MADV_HUGEPAGE) asked for them (the
// "[madvise]" setting, the default of most distributions). With
// "[always]" the heap has them already; with "[never]" it cannot.
func hugePagesAdvised() bool {
	b, err := os.ReadFile(thpEnabled)
	return err == nil && bytes.Contains(b, []byte("[madvise]"))
}

// adviseHugeHeap maps size bytes of heap, frees them, and asks the kernel
// to back them with huge pages: the allocations that follow reuse those
// pages, one fault for each 2 MiB rather than 512. It returns where the
// advised range starts and its length (0: none).
func adviseHugeHeap(size int) (start uintptr, advised int) {
	b := make([]byte, size) // fresh from the kernel: not zeroed, not touched
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := int((p+hugePage-1)&^(hugePage-1) - p)
	hi := int((p+uintptr(size))&^(hugePage-1) - p)
	if lo < hi && unix.Madvise(b[lo:hi], unix.MADV_HUGEPAGE) == nil {
		start, advised = p+uintptr(lo), hi-lo
	}
	// Freed, the block's pages stay mapped and advised: the runtime keeps
	// a free span's memory until its scavenger returns it, which under a
	// one-shot command's settings it does not do for this much.
	runtime.KeepAlive(b)
	b = nil
	runtime.GC()
	return start, advised
}

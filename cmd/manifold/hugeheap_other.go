//go:build !linux

package main

func hugePagesAdvised() bool { return false }

func adviseHugeHeap(int) (uintptr, int) { return 0, 0 }

// Package facts gathers a host's facts in CCM's shape: host.info (os,
// platform, platformFamily, hostname, virtualizationSystem, ...), network
// (interfaces, addresses, default_ipv4, default_ipv6), cpu.info, memory
// (virtual, swap) and partition (partitions, usage), read with gopsutil;
// then custom facts from a directory (facts.json, facts.yaml, facts.d/*)
// and k=v overrides. Values are plain JSON-shaped maps, lists, strings,
// bools, int64 and float64, so templates and the bus see the same thing.
package facts

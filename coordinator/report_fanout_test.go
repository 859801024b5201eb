package coordinator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// fanOutReport is a converged fan-out's report over hosts hosts, each
// child with files file resources, as a fold nests them.
func fanOutReport(hosts, files int) *Report {
	start := time.Date(2026, 11, 27, 13, 0, 0, 0, time.UTC)
	end := start.Add(2 * time.Second)
	root := "20261127T130000Z-0a1b2c3d4e"
	rep := &Report{RunID: root, Manifest: "fleet.yaml", Status: RunSucceeded, Counts: Counts{Total: hosts, Stable: hosts},
		TraceID: "de5e3b24fba8aa35448d6fc5ef383672", Pool: "fleet", Coordinator: "coord-1", StartedAt: &start, FinishedAt: &end}
	for h := range hosts {
		host := fmt.Sprintf("host-%05d", h)
		child := &Report{RunID: fmt.Sprintf("%s-a%d", root, h), Manifest: "fleet.yaml", Status: RunSucceeded, Depth: 1,
			Counts: Counts{Total: files, Stable: files}, TraceID: rep.TraceID, RootRunID: root, ParentRunID: root,
			Pool: "fleet", Coordinator: "coord-1", StartedAt: &start, FinishedAt: &end}
		for f := range files {
			ref := fmt.Sprintf("file#/srv/fleet/file-%02d.conf", f)
			child.Resources = append(child.Resources, ResourceReport{Ref: ref, Type: "file", Name: ref[5:], Status: "stable",
				Worker: host, Attempts: 1, Pool: "fleet", DurationMS: int64(f % 3)})
		}
		rep.Resources = append(rep.Resources, ResourceReport{Ref: "apply#" + host, Type: "apply", Name: host, Status: "stable",
			Worker: host, Attempts: 1, Pool: "fleet", ChildRunID: child.RunID, Child: child})
	}
	return rep
}

// BenchmarkFanOutReportPrint is what `manifold status --output json`
// does with a fan-out's stored report once read: decode it, encode it
// again, indent it.
func BenchmarkFanOutReportPrint(b *testing.B) {
	for _, hosts := range []int{1000, 3000} {
		data, err := marshalReport(fanOutReport(hosts, 20))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			b.ReportMetric(float64(len(data))/(1<<20), "MB")
			for b.Loop() {
				var rep Report
				if err := decodeReport(data, &rep); err != nil {
					b.Fatal(err)
				}
				out, err := MarshalReport(&rep)
				if err != nil {
					b.Fatal(err)
				}
				var buf bytes.Buffer
				buf.Grow(2*len(out) + 1)
				if err := json.Indent(&buf, out, "", "  "); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package coordinator

import (
	"fmt"

	"github.com/manifold-run/manifold/resources"
)

// MaxRunDiffBytes bounds the diffs a run keeps, all resources together,
// in the order their outcomes arrive; a diff past it is replaced by a
// marker saying so. A worker bounds the diff of one resource
// (resources.MaxDiffBytes, 64 KiB); the coordinator bounds it again (an
// outcome is a worker's word) and bounds the run's total, so that the
// run's report and the coordinator's memory do not grow with the number
// of changed resources times their diffs.
const MaxRunDiffBytes = 4 << 20

// keepDiff is the diff of an outcome as the run keeps it: cut at
// resources.MaxDiffBytes, and replaced by a marker once the run's diffs
// reach MaxRunDiffBytes. The fold of a run's history is deterministic, so
// a replay keeps the same diffs.
func (m *machine) keepDiff(d string) string {
	if d == "" {
		return ""
	}
	d = resources.BoundDiff(d)
	if m.diffBytes+len(d) > MaxRunDiffBytes {
		return fmt.Sprintf("[manifold: diff dropped: the run's diffs reached %d bytes]\n", MaxRunDiffBytes)
	}
	m.diffBytes += len(d)
	return d
}

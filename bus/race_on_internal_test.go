//go:build race

package bus

// raceEnabled: sync.Pool drops items at random under the race detector,
// so allocation counts of pooled paths are not asserted there.
const raceEnabled = true

//go:build race

package coordinator

// raceEnabled: sync.Pool drops items at random under the race detector
// (the bus's MACs are pooled), so allocation counts of verification are
// not compared there.
const raceEnabled = true

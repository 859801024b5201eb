// Package bench is manifold's benchmark harness: it builds the manifold
// binary, generates CCM-format manifests of N file resources and measures
// whole-process wall time and peak RSS of validate, first apply, converged
// apply, noop and a three-file drift; a floor (a plain Go loop doing the
// same file work); distributed throughput with 1, 2 and 4 workers; per-task
// bus latency; the cost of one apply level; and, given a CCM binary, the same
// scenarios for CCM, run pair by pair in alternation, with manifold/CCM
// ratios. Mode fleet (asked for by name) runs each-worker runs over
// thousands of simulated hosts, held by the hidden command `benchrun
// fleet-hosts`. Run it with `go tool -modfile=tools.mod task bench:compare` or
// `go run ./e2e/bench/cmd/benchrun --help`.
//
// It is a program, not a test suite: its end-to-end tests are a smoke test
// that runs every default mode once on one resource, and a fleet of 20
// hosts.
package bench

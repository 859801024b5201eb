// Package e2e tests manifold as a user runs it. TestMain builds the binary
// once; each test runs it as separate processes against manifests written
// into its own temporary directory and asserts on exit codes, output, the
// run report and the files left on disk. Run with `go test ./e2e/`.
package e2e

//go:build cgo && !osusergo

package ids

// nssFallback: this build's os/user asks NSS through the C library.
var nssFallback = false

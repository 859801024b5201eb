//go:build !cgo || osusergo

package ids

// nssFallback: this build's os/user reads only /etc/passwd and /etc/group;
// names they do not hold are asked of getent.
var nssFallback = true

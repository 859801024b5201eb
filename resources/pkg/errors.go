package pkg

import "errors"

var (
	// ErrInvalidName is wrapped by the validation error of a package name
	// outside [A-Za-z0-9._+:~-] (shell metacharacters, spaces, a leading
	// '-') or longer than MaxName.
	ErrInvalidName = errors.New("invalid package name")
	// ErrInvalidVersion is wrapped by the validation error of an ensure
	// that is neither present, absent, latest nor a plausible version.
	ErrInvalidVersion = errors.New("invalid package version")
	// ErrCommandFailed is wrapped by the error of a package-manager command
	// that exited non-zero.
	ErrCommandFailed = errors.New("package manager command failed")
	// ErrNoCandidate is returned for ensure latest when the package
	// manager knows no installable version.
	ErrNoCandidate = errors.New("no installation candidate")
)

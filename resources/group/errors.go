package group

import "errors"

var (
	// ErrInvalidName is wrapped by the validation error of a user or group
	// name outside the portable rules (see CheckName).
	ErrInvalidName = errors.New("invalid account name")
	// ErrInvalidID is wrapped by the validation error of a uid or gid that
	// is not a whole number from 0 to MaxID.
	ErrInvalidID = errors.New("invalid numeric id")
	// ErrMalformedDatabase is wrapped by the error of a line of /etc/group
	// or /etc/passwd that does not have the expected fields.
	ErrMalformedDatabase = errors.New("malformed account database")
	// ErrNotFound is wrapped when a group a resource names does not exist.
	ErrNotFound = errors.New("no such group")
	// ErrCommandFailed is wrapped by the error of a groupadd, groupmod or
	// groupdel that exited non-zero.
	ErrCommandFailed = errors.New("account command failed")
)

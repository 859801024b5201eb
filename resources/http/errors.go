package http

import "errors"

var (
	// ErrStatus is the error of a response whose status is not expected.
	ErrStatus = errors.New("unexpected HTTP status")
	// ErrNoMatch is the error of a response whose body does not match the
	// match property.
	ErrNoMatch = errors.New("response body does not match")
	// ErrNotIdempotent is the Validate error of a request with a method
	// other than GET or HEAD that has neither an unless guard nor always.
	ErrNotIdempotent = errors.New("a request that changes something needs an unless guard or always: true")
)

package resources

import "errors"

var (
	// ErrUnknownType is returned by Registry.New for a type nobody registered.
	ErrUnknownType = errors.New("unknown resource type")
	// ErrNotConverged is the error of an Outcome whose re-check after apply
	// still found the resource drifting.
	ErrNotConverged = errors.New("resource did not converge after apply")
	// ErrHealthCheck is the error of an Outcome whose health checks ended
	// CRITICAL or UNKNOWN (WARNING passes).
	ErrHealthCheck = errors.New("health check failed")
)

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

var (
	// ErrUnknownProvider is wrapped by the error of a resource whose provider
	// property names no provider of its type.
	ErrUnknownProvider = errors.New("unknown provider")
	// ErrNoSuitableProvider is returned when no provider of a type can manage
	// this host.
	ErrNoSuitableProvider = errors.New("no suitable provider")
	// ErrProviderNotManageable is returned when the forced provider cannot
	// manage this host.
	ErrProviderNotManageable = errors.New("provider cannot manage this host")
	// ErrInvalidStateKey is wrapped by MemoryState and FileState errors for
	// an empty key or one longer than MaxStateKey.
	ErrInvalidStateKey = errors.New("state: invalid key")
	// ErrStateTooLarge is returned by StateStore.Put for a value over
	// MaxStateValue bytes.
	ErrStateTooLarge = errors.New("state: value too large")
)

package bench

import "errors"

// ErrConfig is the error of a configuration the harness refuses (a size,
// repetition count or worker count past its limit, an unknown mode).
var ErrConfig = errors.New("bench: invalid configuration")

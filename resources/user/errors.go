package user

import "errors"

var (
	// ErrInvalidPath is wrapped by the validation error of a home or shell
	// that is not an absolute path without ':' or control characters.
	ErrInvalidPath = errors.New("invalid path")
	// ErrInvalidComment is wrapped by the validation error of a comment
	// with ':' or control characters, or longer than MaxComment.
	ErrInvalidComment = errors.New("invalid comment")
	// ErrTooManyGroups is wrapped by the validation error of a groups list
	// longer than MaxGroups.
	ErrTooManyGroups = errors.New("too many groups")
)

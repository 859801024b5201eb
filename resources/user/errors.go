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

var (
	// ErrProtectedAccount is wrapped by the error of a user resource that
	// would remove or renumber root, another account of uid 0, or the
	// account the worker runs as: the host (or the worker) would be left
	// without it.
	ErrProtectedAccount = errors.New("refusing to remove or renumber a protected account")
	// ErrLinkedHome is wrapped by the error of a user resource whose
	// useradd -m, usermod -m, usermod -u or userdel -r would create, move,
	// re-own or remove a home directory that is a symbolic link (the tools
	// would act on what it points to), or the root directory.
	ErrLinkedHome = errors.New("refusing to manage a home directory through a symlink")
)

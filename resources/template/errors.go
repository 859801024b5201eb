package template

import "errors"

var (
	// ErrOutsideDir is a file(), readFile(), template() or jet() path that is
	// absolute, climbs out with "..", or resolves through a symlink to a
	// place outside Scope.Dir.
	ErrOutsideDir = errors.New("template: path is outside the manifest directory")
	// ErrNoDir is a file function called in a scope without a Dir.
	ErrNoDir = errors.New("template: file functions need a base directory")
	// ErrFileTooLarge is a file over MaxFileSize.
	ErrFileTooLarge = errors.New("template: file is too large")
	// ErrDepthExceeded is template() or jet() nested deeper than MaxDepth
	// (a template that includes itself).
	ErrDepthExceeded = errors.New("template: templates nested too deeply")
	// ErrJet is a Jet template that fails to parse or execute.
	ErrJet = errors.New("template: jet")
)

package scaffold

import (
	"errors"

	"github.com/manifold-run/manifold/resources/exec"
)

// postArgv splits a post command with the shell's quoting rules and puts
// path where "{}" is, or last when no argument holds "{}"; in the script of
// a shell's -c, "{}" becomes a quoted positional parameter holding path, so
// a file name is never parsed as shell code (exec.PlaceArgument).
func postArgv(cmd, path string) ([]string, error) {
	parts, err := exec.SplitCommand(cmd)
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, errors.New("empty command")
	}
	return exec.PlaceArgument(parts, path), nil
}

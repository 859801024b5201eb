package scaffold

import (
	"errors"
	"strings"

	"github.com/manifold-run/manifold/resources/exec"
)

// postArgv splits a post command with the shell's quoting rules and puts
// path where "{}" is, or last when no argument holds "{}".
func postArgv(cmd, path string) ([]string, error) {
	parts, err := exec.SplitCommand(cmd)
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, errors.New("empty command")
	}
	argv := []string{parts[0]}
	placed := false
	for _, p := range parts[1:] {
		if strings.Contains(p, "{}") {
			p = strings.ReplaceAll(p, "{}", path)
			placed = true
		}
		argv = append(argv, p)
	}
	if !placed {
		argv = append(argv, path)
	}
	return argv, nil
}

package resources

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// ReplayStep is one expected command and the result recorded for it.
//
// In a replay file (see LoadReplay) a step is a JSON object:
//
//	{"argv": ["dpkg-query", "-W", "nginx"], "exit": 0, "stdout_file": "dpkg-query-nginx.stdout"}
//
// with stdout and stderr given inline ("stdout", "stderr") or as files
// relative to the replay file ("stdout_file", "stderr_file"), and "error" to
// make the command fail to start.
type ReplayStep struct {
	// Argv is the exact command expected.
	Argv []string `json:"argv"`
	// ExitCode is the recorded exit code.
	ExitCode int `json:"exit"`
	// Stdout is the recorded standard output.
	Stdout string `json:"stdout"`
	// Stderr is the recorded standard error.
	Stderr string `json:"stderr"`
	// StdoutFile, in a replay file, names a file holding Stdout.
	StdoutFile string `json:"stdout_file"`
	// StderrFile, in a replay file, names a file holding Stderr.
	StderrFile string `json:"stderr_file"`
	// Err, when not empty, makes Run return an error with this text instead
	// of a result, as when the program cannot start.
	Err string `json:"error"`
}

// ReplayRunner is a CommandRunner for tests of system tools that cannot run
// on the test host (apt-get, dpkg-query, systemctl). It answers each command
// with the first unused step whose Argv equals the command's, so the same
// command can be answered differently on later calls (before and after an
// install), in the order the steps are listed. A command no step expects is
// an error naming it. It is safe for concurrent use.
type ReplayRunner struct {
	mu       sync.Mutex
	steps    []ReplayStep
	used     []bool
	calls    []Command
	programs []string
}

var _ CommandRunner = (*ReplayRunner)(nil)

// ErrUnexpectedCommand is returned by ReplayRunner.Run for a command that no
// unused step expects.
var ErrUnexpectedCommand = errors.New("replay: unexpected command")

// NewReplayRunner returns a runner that answers with steps.
func NewReplayRunner(steps ...ReplayStep) *ReplayRunner {
	return &ReplayRunner{steps: steps, used: make([]bool, len(steps))}
}

// LoadReplay reads a replay file: a JSON array of ReplayStep objects. Output
// files named by a step are read relative to the replay file's directory.
func LoadReplay(path string) (*ReplayRunner, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	var steps []ReplayStep
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&steps); err != nil {
		return nil, fmt.Errorf("replay %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for i := range steps {
		s := &steps[i]
		if len(s.Argv) == 0 {
			return nil, fmt.Errorf("replay %s: step %d: empty argv", path, i)
		}
		for _, f := range []struct {
			name string
			into *string
		}{{s.StdoutFile, &s.Stdout}, {s.StderrFile, &s.Stderr}} {
			if f.name == "" {
				continue
			}
			out, err := os.ReadFile(filepath.Join(dir, f.name))
			if err != nil {
				return nil, fmt.Errorf("replay %s: step %d: %w", path, i, err)
			}
			*f.into = string(out)
		}
	}
	return NewReplayRunner(steps...), nil
}

// Run returns the recorded result of the first unused step expecting
// c.Argv and marks it used. It does not block and ignores ctx unless it is
// already done.
func (r *ReplayRunner) Run(ctx context.Context, c Command) (CommandResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	if err := ctx.Err(); err != nil {
		return CommandResult{ExitCode: -1}, fmt.Errorf("run %s: %w", argvString(c.Argv), err)
	}
	for i, s := range r.steps {
		if r.used[i] || !slices.Equal(s.Argv, c.Argv) {
			continue
		}
		r.used[i] = true
		if s.Err != "" {
			return CommandResult{ExitCode: -1}, fmt.Errorf("run %s: %s", argvString(c.Argv), s.Err)
		}
		return CommandResult{ExitCode: s.ExitCode, Stdout: []byte(s.Stdout), Stderr: []byte(s.Stderr)}, nil
	}
	return CommandResult{ExitCode: -1}, fmt.Errorf("%w: %s", ErrUnexpectedCommand, argvString(c.Argv))
}

// SetPrograms declares programs LookPath finds besides those the steps run,
// so a provider's Manageable sees the host the recording came from.
func (r *ReplayRunner) SetPrograms(names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.programs = append(r.programs, names...)
}

// LookPath finds name when a step runs it (its argv[0]) or SetPrograms
// declared it, answering "/usr/bin/<name>"; otherwise it fails as
// exec.LookPath would. It makes ReplayRunner a ProgramFinder.
func (r *ReplayRunner) LookPath(name string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	found := slices.Contains(r.programs, name)
	for _, s := range r.steps {
		found = found || s.Argv[0] == name
	}
	if !found {
		return "", fmt.Errorf("replay: %q: executable file not found in $PATH", name)
	}
	if strings.Contains(name, "/") {
		return name, nil
	}
	return "/usr/bin/" + name, nil
}

// Calls returns the commands Run received, in order.
func (r *ReplayRunner) Calls() []Command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Verify returns an error naming every step that was never used, or nil.
func (r *ReplayRunner) Verify() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var missing []string
	for i, s := range r.steps {
		if !r.used[i] {
			missing = append(missing, argvString(s.Argv))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("replay: %d expected command(s) not run: %s", len(missing), strings.Join(missing, "; "))
	}
	return nil
}

// argvString renders argv for messages, quoting arguments that need it.
func argvString(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$") {
			parts[i] = fmt.Sprintf("%q", a)
		} else {
			parts[i] = a
		}
	}
	return strings.Join(parts, " ")
}

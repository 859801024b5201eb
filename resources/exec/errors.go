package exec

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrUnbalancedQuote is returned by SplitCommand for a command line
	// whose quote is never closed.
	ErrUnbalancedQuote = errors.New("unbalanced quote")
	// ErrTrailingBackslash is returned by SplitCommand for a command line
	// that ends with an unescaped backslash.
	ErrTrailingBackslash = errors.New("trailing backslash")
)

// MaxOutputBytes bounds the command output an exec resource reports: the
// output logoutput puts in the outcome's message, and each of stdout and
// stderr of an ExitError. Longer output keeps its tail after a line
// "[manifold: N bytes of output truncated]".
const MaxOutputBytes = 16 << 10

// boundOutput keeps the last MaxOutputBytes of s (cut at a line start when
// one is near) behind a truncation line.
func boundOutput(s string) string {
	if len(s) <= MaxOutputBytes {
		return s
	}
	tail := s[len(s)-MaxOutputBytes:]
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < 1024 {
		tail = tail[i+1:]
	}
	return fmt.Sprintf("[manifold: %d bytes of output truncated]\n", len(s)-len(tail)) + tail
}

// outputTailLines is how many lines of stderr and of stdout an ExitError
// message shows.
const outputTailLines = 10

// ExitError is the error of a command that exited with a code not in its
// returns property. Its message's first line names the command and the exit
// code; the last lines of stderr and stdout follow.
type ExitError struct {
	// Command is the command line as written in the manifest.
	Command string
	// ExitCode is the code the command exited with (128+n when signal n
	// killed it).
	ExitCode int
	// Returns are the exit codes that would have meant success.
	Returns []int
	// Stdout and Stderr are the captured output, each bounded by
	// MaxOutputBytes.
	Stdout, Stderr string
}

// Error returns "<command> exited with code N, want one of [..]" and the tail
// of the output on the following lines.
func (e *ExitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s exited with code %d, want one of %v", e.Command, e.ExitCode, e.Returns)
	for _, o := range []struct{ name, text string }{{"stderr", e.Stderr}, {"stdout", e.Stdout}} {
		if tail := lastLines(o.text, outputTailLines); tail != "" {
			fmt.Fprintf(&b, "\n%s:\n%s", o.name, tail)
		}
	}
	return b.String()
}

// lastLines returns the last n non-trailing lines of s.
func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[... %d lines]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelpGoesToStdout: help the user asks for goes to stdout with exit 0;
// usage after a bad flag goes to stderr with exit 2.
func TestHelpGoesToStdout(t *testing.T) {
	for _, cmd := range []string{"apply", "run", "validate", "status", "worker"} {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), IO{Stdout: &out, Stderr: &errOut}, []string{cmd, "--help"})
		if code != ExitOK || !strings.HasPrefix(out.String(), "Usage: manifold "+cmd) || errOut.Len() != 0 {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q", cmd, code, out.String(), errOut.String())
		}
		out.Reset()
		errOut.Reset()
		code = Run(context.Background(), IO{Stdout: &out, Stderr: &errOut}, []string{cmd, "--no-such-flag"})
		if code != ExitInvalid || out.Len() != 0 || !strings.Contains(errOut.String(), "Usage: manifold "+cmd) {
			t.Errorf("%s --no-such-flag: exit %d, stdout %q, stderr %q", cmd, code, out.String(), errOut.String())
		}
	}
}

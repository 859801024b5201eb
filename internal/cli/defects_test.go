package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// run runs a command line in process and returns its exit code, stdout
// and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), IO{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}, args)
	return code, out.String(), errOut.String()
}

// TestCycleIsInvalid: a require cycle under ordering: graph is exit 2 with
// the chain from validate, and from apply at once, before anything runs
// (it used to pass validate and hang the run until --timeout).
func TestCycleIsInvalid(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	manifest := filepath.Join(dir, "m.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`ordering: graph
resources:
  - exec:
      - first: {command: "touch `+marker+`"}
      - a: {command: "true", require: ["exec#b"]}
      - b: {command: "true", subscribe: ["exec#a"]}
`), 0o600))
	want := manifest + ":5:9: compile: dependency cycle: exec#a -> exec#b -> exec#a"

	code, out, errOut := runCLI(t, "validate", manifest)
	require.Equal(t, ExitInvalid, code, "stdout %q stderr %q", out, errOut)
	require.Contains(t, errOut, want)

	start := time.Now()
	code, out, errOut = runCLI(t, "apply", "--timeout", "5s", manifest)
	require.Equal(t, ExitInvalid, code, "stdout %q stderr %q", out, errOut)
	require.Contains(t, errOut, want)
	require.Less(t, time.Since(start), 4*time.Second)
	require.NoFileExists(t, marker, "nothing runs")
}

// TestSchemaUnknownType: `schema nosuch` is exit 2 naming the types, not
// an empty output and exit 0.
func TestSchemaUnknownType(t *testing.T) {
	code, out, errOut := runCLI(t, "schema", "nosuch")
	require.Equal(t, ExitInvalid, code)
	require.Empty(t, out)
	require.Contains(t, errOut, `manifold schema: no schema "nosuch" (there are: apply, archive,`)

	for _, arg := range []string{"file", "file.cue"} {
		code, out, _ = runCLI(t, "schema", arg)
		require.Equal(t, ExitOK, code)
		require.True(t, strings.HasPrefix(out, "// file.cue\n"), out)
		require.NotContains(t, out, "// exec.cue")
	}
}

// TestHelpArgumentNames: no flag of any command shows a phrase as its
// argument name (Go's flag takes back-quoted text of the usage as the
// name: "-credentials manifold server").
func TestHelpArgumentNames(t *testing.T) {
	flagLine := regexp.MustCompile(`(?m)^  -([\w-]+) (\S.*)$`)
	for _, c := range commands() {
		code, out, _ := runCLI(t, c.name, "--help")
		require.Equal(t, ExitOK, code, c.name)
		_, flags, ok := strings.Cut(out, "\nFlags:\n")
		if !ok { // version
			continue
		}
		for _, m := range flagLine.FindAllStringSubmatch(flags, -1) {
			require.NotContains(t, m[2], " ", "manifold %s --help: -%s %s", c.name, m[1], m[2])
		}
	}
	_, out, _ := runCLI(t, "worker", "--help")
	require.Contains(t, out, "  -credentials DIR\n")
}

// TestBadFlagPointsToHelp: a bad flag prints the error, the synopsis and a
// pointer to --help on stderr, not the whole help.
func TestBadFlagPointsToHelp(t *testing.T) {
	for _, cmd := range []string{"apply", "run", "worker", "status"} {
		code, out, errOut := runCLI(t, cmd, "--no-such-flag")
		require.Equal(t, ExitInvalid, code)
		require.Empty(t, out)
		require.Equal(t, "flag provided but not defined: -no-such-flag\n", strings.SplitAfter(errOut, "\n")[0], cmd)
		require.Contains(t, errOut, "Run 'manifold "+cmd+" --help' for its flags.\n")
		require.LessOrEqual(t, strings.Count(errOut, "\n"), 3, "%s: %q", cmd, errOut)
		require.NotContains(t, errOut, "Flags:")
	}
}

// TestVersion: the version comes from the build: the module's version
// or the VCS revision and time the toolchain stamps, not "dev" alone.
func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		linked string
		bi     *debug.BuildInfo
		want   string
	}{
		{"dev", nil, "dev"},
		{"dev", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "a9f55c55cdaafc83a09bd0c386164e160036af84"},
			{Key: "vcs.time", Value: "2026-11-25T12:58:13Z"}, {Key: "vcs.modified", Value: "false"}}},
			"dev (revision a9f55c55cdaafc83a09bd0c386164e160036af84, 2026-11-25T12:58:13Z, go1.26.0)"},
		{"dev", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261125125813-a9f55c55cdaa+dirty"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "a9f55c55cdaafc83a09bd0c386164e160036af84"}, {Key: "vcs.time", Value: "2026-11-25T12:58:13Z"}, {Key: "vcs.modified", Value: "true"}}},
			"dev (revision a9f55c55cdaafc83a09bd0c386164e160036af84+modified, 2026-11-25T12:58:13Z, go1.26.0)"},
		{"dev", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3 (go1.26.0)"},
		{"v2.0.0", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}}, "v2.0.0 (go1.26.0)"},
	} {
		require.Equal(t, tc.want, versionOf(tc.linked, tc.bi))
	}
	code, out, _ := runCLI(t, "version")
	require.Equal(t, ExitOK, code)
	bi, ok := debug.ReadBuildInfo()
	require.True(t, ok)
	require.Equal(t, "manifold "+versionOf(Version, bi)+"\n", out)
	require.Contains(t, out, bi.GoVersion)
}

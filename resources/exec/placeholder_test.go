package exec

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPlaceArgument(t *testing.T) {
	t.Parallel()
	const v = "/t/a b; rm -rf x"
	for _, tt := range []struct {
		line string
		want []string
	}{
		{"chmod +x {}", []string{"chmod", "+x", v}},
		{"chmod +x", []string{"chmod", "+x", v}},
		{"cp {} {}.bak", []string{"cp", v, v + ".bak"}},
		{"sh -c 'chmod +x {}'", []string{"sh", "-c", `chmod +x "${1}"`, "sh", v}},
		{`/bin/bash -e -o pipefail -c "test -f '{}' && echo \"{}.ok\""`, []string{"/bin/bash", "-e", "-o", "pipefail", "-c", `test -f ''"${1}"'' && echo "${1}.ok"`, "bash", v}},
		{"sh -ec 'x {}' name first", []string{"sh", "-ec", `x "${2}"`, "name", "first", v}},
		{"sh -c 'echo no placeholder'", []string{"sh", "-c", "echo no placeholder", v}},
		{"sh script.sh {}", []string{"sh", "script.sh", v}},
		{"python3 -c 'print({})'", []string{"python3", "-c", "print(" + v + ")"}}, // not a shell: one literal argument
	} {
		argv, err := SplitCommand(tt.line)
		if err != nil {
			t.Fatal(err)
		}
		if got := PlaceArgument(argv, v); !slices.Equal(got, tt.want) {
			t.Errorf("%s:\n got %q\nwant %q", tt.line, got, tt.want)
		}
	}
}

// TestPlaceArgumentShellInjection runs real shells with a file name made
// to break out of the script: every form of "{}" in an sh -c script gets
// the name as one word, and nothing else runs.
func TestPlaceArgumentShellInjection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hostile := filepath.Join(dir, `x'; touch pwned; echo '$(touch pwned2)"; touch pwned3; "`)
	for _, line := range []string{
		`sh -c 'touch {}'`,
		`sh -c "touch '{}'"`,
		`sh -c 'touch "{}"'`,
		`sh -c "touch {}"`,
		`sh -ec 'touch -- "{}"'`,
	} {
		if err := os.RemoveAll(hostile); err != nil {
			t.Fatal(err)
		}
		argv, err := SplitCommand(line)
		if err != nil {
			t.Fatal(err)
		}
		cmd := osexec.Command(argv[0], PlaceArgument(argv, hostile)[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", line, err, out)
		}
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if len(names) != 1 || names[0] != filepath.Base(hostile) || strings.Contains(strings.Join(names, " "), "pwned ") {
			t.Fatalf("%s: the directory holds %q, want only the hostile name", line, names)
		}
	}
}

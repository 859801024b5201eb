package cli

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// maxPackageInitAllocs bounds the allocations of the package-level
// initialisation of each of manifold's own packages: every command, even
// `manifold version`, pays for them before it starts. A regular expression
// compiled into a package variable costs hundreds to thousands (bus's
// host-name pattern: 2,196); such patterns are compiled on first use
// (sync.OnceValue).
const maxPackageInitAllocs = 100

// TestPackageInitIsCheap runs this test binary (which links the CLI and so
// nearly every package of the module) with GODEBUG=inittrace=1 and no test,
// and requires each of manifold's packages to initialise in at most
// maxPackageInitAllocs allocations.
func TestPackageInitIsCheap(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	const module = "github.com/manifold-run/manifold/"
	seen, total := 0, 0
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		// init PKG @T ms, C ms clock, B bytes, A allocs
		f := strings.Fields(sc.Text())
		if len(f) != 11 || f[0] != "init" || f[10] != "allocs" || !strings.HasPrefix(f[1], module) {
			continue
		}
		allocs, err := strconv.Atoi(f[9])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", sc.Text(), err)
		}
		seen++
		total += allocs
		if allocs > maxPackageInitAllocs {
			t.Errorf("package %s: init made %d allocations, want at most %d (a regexp.MustCompile in a package variable? compile it on first use)",
				f[1], allocs, maxPackageInitAllocs)
		}
	}
	if seen < 10 {
		t.Fatalf("inittrace reported %d of manifold's packages, want the CLI's dependencies:\n%s", seen, stderr.String())
	}
	t.Logf("%d packages of manifold, %d allocations in their init", seen, total)
}

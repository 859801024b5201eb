package file

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-run/manifold/resources"
)

// TestHelperWriter is not a test: run as a separate process by
// TestStaleTempsRemoved, it creates and locks a temporary file of the
// target the way writeAtomic does, prints its name and waits to be killed.
func TestHelperWriter(t *testing.T) {
	target := os.Getenv("MANIFOLD_FILE_TEST_TARGET")
	if target == "" {
		t.Skip("helper process only")
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+tempInfix+"*")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if err := syscall.Flock(int(tmp.Fd()), syscall.LOCK_EX); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(tmp.Name())
	select {}
}

// TestStaleTempsRemoved: the temporary file of a writer killed with
// SIGKILL before its rename is removed by the next write of that file;
// the temporary file of a live writer, a fresh one and files of other
// names are not.
func TestStaleTempsRemoved(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "app.conf")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$")
	cmd.Env = append(os.Environ(), "MANIFOLD_FILE_TEST_TARGET="+target)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	dead := strings.TrimSpace(line)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// A live writer's file, held locked by this process.
	live, err := os.CreateTemp(dir, ".app.conf"+tempInfix+"*")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := syscall.Flock(int(live.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, ".other.conf"+tempInfix+"123")
	notOurs := filepath.Join(dir, ".app.conf"+tempInfix+"x1")
	for _, p := range []string{other, notOurs} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Minute)
	for _, p := range []string{dead, live.Name(), other, notOurs} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// A fresh, unlocked one (a writer between create and lock).
	fresh := filepath.Join(dir, ".app.conf"+tempInfix+"42")
	if err := os.WriteFile(fresh, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	o := execute(t, build(t, target, "present", map[string]any{"content": "x\n"}), resources.Env{})
	if o.Status != resources.StatusChanged {
		t.Fatalf("apply: %+v", o)
	}
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Errorf("the killed writer's %s is still there (%v)", dead, err)
	}
	for _, p := range []string{live.Name(), other, notOurs, fresh} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}

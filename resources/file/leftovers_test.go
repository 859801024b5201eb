package file

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	tmp, err := createTemp(filepath.Dir(target), filepath.Base(target))
	if err != nil {
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

	if dead != tempPath(dir, "app.conf", 0) {
		t.Fatalf("the first writer took %s, not slot 0", dead)
	}
	// A live writer's file, held locked by this process: slot 0 is taken
	// (the dead writer's file is still fresh), so slot 1.
	live, err := createTemp(dir, "app.conf")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if live.Name() != tempPath(dir, "app.conf", 1) {
		t.Fatalf("the second writer took %s, not slot 1", live.Name())
	}
	other := filepath.Join(dir, ".other.conf"+tempInfix+"3")
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
	fresh := tempPath(dir, "app.conf", 2)
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

// TestEveryTempSlotTaken: with every slot held by a live writer, a write
// still lands (on a temporary file of another name) and leaves the slots
// alone.
func TestEveryTempSlotTaken(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "app.conf")
	for range tempSlots {
		f, err := createTemp(dir, "app.conf")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	o := execute(t, build(t, target, "present", map[string]any{"content": "x\n"}), resources.Env{})
	if o.Status != resources.StatusChanged {
		t.Fatalf("apply: %+v", o)
	}
	if got, _ := os.ReadFile(target); string(got) != "x\n" {
		t.Fatalf("content %q", got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != tempSlots+1 {
		t.Fatalf("%d entries, want the %d held slots and the target", len(entries), tempSlots)
	}
}

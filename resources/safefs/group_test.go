package safefs_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-run/manifold/resources/safefs"
)

// TestGroupCommit: every staged file replaces its target with its content,
// mode and owner, nothing is visible before Commit, one sync step covers
// them all (both modes), the directories' temporary files are gone after.
func TestGroupCommit(t *testing.T) {
	for _, mode := range []safefs.SyncMode{safefs.SyncFS, safefs.SyncEach} {
		t.Run(string(mode), func(t *testing.T) {
			dirA, dirB := t.TempDir(), t.TempDir()
			var g safefs.Group
			safefs.SetGroupSync(&g, mode)
			var targets []string
			for i, dir := range []string{dirA, dirA, dirA, dirB, dirB} {
				d, err := safefs.OpenDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				name := "f" + strconv.Itoa(i)
				if i%2 == 0 { // an old content to replace
					if err := os.WriteFile(filepath.Join(dir, name), []byte("old"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				if err := g.Add(d, name, []byte("new "+name), 0o640, -1, -1); err != nil {
					t.Fatal(err)
				}
				d.Close() // the group keeps its own descriptor
				targets = append(targets, filepath.Join(dir, name))
			}
			if g.Len() != 5 {
				t.Fatalf("Len %d", g.Len())
			}
			if b, _ := os.ReadFile(targets[0]); string(b) != "old" {
				t.Fatalf("replaced before Commit: %q", b)
			}
			for _, p := range []string{targets[1], targets[3]} {
				if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("%s exists before Commit: %v", p, err)
				}
			}
			var steps []string
			safefs.SetCommitHook(func(step string, i int) {
				if step != "renamed" {
					steps = append(steps, step)
				}
			})
			defer safefs.SetCommitHook(nil)
			for i, err := range g.Commit() {
				if err != nil {
					t.Fatalf("file %d: %v", i, err)
				}
			}
			if got := strings.Join(steps, ","); got != "written,synced,done" {
				t.Fatalf("steps %s", got)
			}
			for i, p := range targets {
				b, err := os.ReadFile(p)
				fi, _ := os.Lstat(p)
				if err != nil || string(b) != "new f"+strconv.Itoa(i) || fi.Mode().Perm() != 0o640 {
					t.Errorf("%s: %q %v %v", p, b, fi.Mode(), err)
				}
			}
			for _, dir := range []string{dirA, dirB} {
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					if strings.Contains(e.Name(), safefs.TempInfix) {
						t.Errorf("left behind: %s", e.Name())
					}
				}
			}
			if g.Len() != 0 {
				t.Fatalf("Len after Commit %d", g.Len())
			}
		})
	}
}

// TestGroupLimit: a group takes MaxGroupFiles files; one more is
// ErrGroupFull and leaves nothing behind; after Commit it takes more.
func TestGroupLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := safefs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var g safefs.Group
	for i := range safefs.MaxGroupFiles {
		if err := g.Add(d, "f"+strconv.Itoa(i), []byte("x"), 0o644, -1, -1); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
	}
	if err := g.Add(d, "one-more", []byte("x"), 0o644, -1, -1); !errors.Is(err, safefs.ErrGroupFull) {
		t.Fatalf("file %d: %v, want ErrGroupFull", safefs.MaxGroupFiles+1, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, safefs.TempName("one-more", 0))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused file left a temporary file: %v", err)
	}
	for i, err := range g.Commit() {
		if err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
	}
	if err := g.Add(d, "one-more", []byte("y"), 0o644, -1, -1); err != nil {
		t.Fatal(err)
	}
	if errs := g.Commit(); errs[0] != nil {
		t.Fatal(errs[0])
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != safefs.MaxGroupFiles+1 {
		t.Fatalf("%d entries, want %d", len(entries), safefs.MaxGroupFiles+1)
	}
}

// TestGroupAbort: Abort removes the temporary files and touches no
// target.
func TestGroupAbort(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := safefs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var g safefs.Group
	for _, n := range []string{"a", "b"} {
		if err := g.Add(d, n, []byte("new"), 0o644, -1, -1); err != nil {
			t.Fatal(err)
		}
	}
	g.Abort()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "a" {
		t.Fatalf("entries after Abort: %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "old" {
		t.Fatalf("a: %q", b)
	}
}

// crashFiles is how many files TestHelperGroupWriter writes.
const crashFiles = 6

// TestHelperGroupWriter is not a test: run as a separate process by
// TestGroupKilledBetweenSteps, it writes crashFiles files as one group and
// stops for good at the step MANIFOLD_SAFEFS_STOP names ("written",
// "synced", "renamed" after the renames of half the files, "done"),
// printing "stopped" to be killed there.
func TestHelperGroupWriter(t *testing.T) {
	dir, stop := os.Getenv("MANIFOLD_SAFEFS_DIR"), os.Getenv("MANIFOLD_SAFEFS_STOP")
	if dir == "" {
		t.Skip("helper process only")
	}
	safefs.SetCommitHook(func(step string, i int) {
		if step == stop && (step != "renamed" || i == crashFiles/2-1) {
			fmt.Println("stopped")
			select {}
		}
	})
	d, err := safefs.OpenDir(dir)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	var g safefs.Group
	for i := range crashFiles {
		// Large enough to be written in several pieces by the kernel.
		data := []byte(strings.Repeat(fmt.Sprintf("new %d\n", i), 40000))
		if err := g.Add(d, "f"+strconv.Itoa(i), data, 0o644, -1, -1); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
	}
	g.Commit()
	fmt.Println("stopped") // no stop step given: done
	select {}
}

// TestGroupKilledBetweenSteps: a writer killed with SIGKILL between any
// two steps of a group's commit leaves each target with its whole old or
// its whole new content, never a mix; the renames done are kept in order
// (the first files first); and the next write of each file removes the
// killed writer's temporary files.
func TestGroupKilledBetweenSteps(t *testing.T) {
	for _, tc := range []struct {
		stop    string
		renamed int // files with their new content after the kill
	}{
		{"written", 0},
		{"synced", 0},
		{"renamed", crashFiles / 2},
		{"done", crashFiles},
	} {
		t.Run(tc.stop, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			old := func(i int) string { return fmt.Sprintf("old %d\n", i) }
			for i := range crashFiles {
				if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), []byte(old(i)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperGroupWriter$")
			cmd.Env = append(os.Environ(), "MANIFOLD_SAFEFS_DIR="+dir, "MANIFOLD_SAFEFS_STOP="+tc.stop)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || strings.TrimSpace(line) != "stopped" {
				_ = cmd.Process.Kill()
				t.Fatalf("helper: %q %v", line, err)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			for i := range crashFiles {
				b, err := os.ReadFile(filepath.Join(dir, "f"+strconv.Itoa(i)))
				if err != nil {
					t.Fatal(err)
				}
				newContent := strings.Repeat(fmt.Sprintf("new %d\n", i), 40000)
				switch got := string(b); {
				case i < tc.renamed && got != newContent:
					t.Errorf("f%d: %d bytes, want the whole new content", i, len(got))
				case i >= tc.renamed && got != old(i):
					t.Errorf("f%d: %d bytes, want the old content", i, len(got))
				}
			}
			// The killed writer's temporary files are removed by the next
			// write of their target once stale (aged here, not waited for).
			entries, _ := os.ReadDir(dir)
			past := time.Now().Add(-time.Minute)
			leftovers := 0
			for _, e := range entries {
				if strings.Contains(e.Name(), safefs.TempInfix) {
					leftovers++
					if err := os.Chtimes(filepath.Join(dir, e.Name()), past, past); err != nil {
						t.Fatal(err)
					}
				}
			}
			if want := crashFiles - tc.renamed; leftovers != want {
				t.Errorf("%d temporary files after the kill, want %d", leftovers, want)
			}
			for i := range crashFiles {
				if err := safefs.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), []byte("again"), 0o644, -1, -1); err != nil {
					t.Fatal(err)
				}
			}
			if entries, _ := os.ReadDir(dir); len(entries) != crashFiles {
				t.Errorf("%d entries after rewriting, want %d: %v", len(entries), crashFiles, entries)
			}
		})
	}
}

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Ordering is a manifest's ordering key.
type Ordering string

// Orderings: manifest (CCM's, declaration order) and graph (only explicit
// edges; manifold's).
const (
	OrderingManifest Ordering = "manifest"
	OrderingGraph    Ordering = "graph"
)

// filesSpec describes a generated manifest of file resources.
type filesSpec struct {
	// dir holds the files; it must exist.
	dir string
	// n is the number of file resources.
	n int
	// owner and group are given to every file (CCM requires them).
	owner, group string
	// exec adds one exec that creates dir/marker once (a guard keeps it
	// from running again), as in a typical manifest.
	exec bool
	// ordering is written when set (CCM knows no such key: leave it empty
	// for a manifest CCM must read).
	ordering Ordering
	// chain makes each file require the one before it: with ordering
	// graph, every resource is then a task of its own, one in flight at a
	// time (no segments).
	chain bool
}

// greeting is the data value every file's content is rendered from.
const greeting = "hello"

// fileName returns the path of the i-th file (from 0).
func (s filesSpec) fileName(i int) string {
	return filepath.Join(s.dir, fmt.Sprintf("f%06d.conf", i))
}

// content returns what the i-th file must hold once converged.
func (s filesSpec) content(i int) string {
	return fmt.Sprintf("%s from file %d\n", greeting, i)
}

// resources returns how many resources the manifest holds.
func (s filesSpec) resources() int {
	if s.exec {
		return s.n + 1
	}
	return s.n
}

// markerPath is the file the exec creates.
func (s filesSpec) markerPath() string { return filepath.Join(s.dir, "marker") }

// yaml renders the manifest in CCM's block shape: a `defaults` entry
// (ensure, owner, group, mode), then one entry per file whose content is a
// template over data, then the exec. CCM and manifold both read it:
// `{{ lookup('data.greeting') }}` is the syntax of both.
func (s filesSpec) yaml() string {
	var b strings.Builder
	b.Grow(120 * (s.n + 4))
	fmt.Fprintf(&b, "data:\n  greeting: %s\n", greeting)
	if s.ordering != "" {
		fmt.Fprintf(&b, "ordering: %s\n", s.ordering)
	}
	b.WriteString("ccm:\n  resources:\n")
	if s.n > 0 {
		b.WriteString("    - file:\n")
		fmt.Fprintf(&b, "        - defaults: {ensure: present, owner: %s, group: %s, mode: \"0644\"}\n", s.owner, s.group)
		for i := range s.n {
			fmt.Fprintf(&b, "        - %s:\n            content: \"{{ lookup('data.greeting') }} from file %d\\n\"\n", s.fileName(i), i)
			if s.chain && i > 0 {
				fmt.Fprintf(&b, "            require: [\"file#%s\"]\n", s.fileName(i-1))
			}
		}
	}
	if s.exec {
		m := s.markerPath()
		b.WriteString("    - exec:\n")
		fmt.Fprintf(&b, "        - /usr/bin/touch %s:\n            creates: %s\n", m, m)
	}
	return b.String()
}

// write writes the manifest to path.
func (s filesSpec) write(path string) error {
	return os.WriteFile(path, []byte(s.yaml()), 0o644)
}

// applyLevelYAML is a manifest holding one apply of the child manifest at
// rel (relative to the parent's directory), in CCM's block shape.
func applyLevelYAML(rel string) string {
	return fmt.Sprintf("ccm:\n  resources:\n    - apply:\n        - %s: {}\n", rel)
}

// verify checks that the files and the marker hold what the manifest asks
// for: the harness checks that each tool did the work it was timed for.
func (s filesSpec) verify() error {
	for i := range s.n {
		got, err := os.ReadFile(s.fileName(i))
		if err != nil {
			return fmt.Errorf("verify: %w", err)
		}
		if string(got) != s.content(i) {
			return fmt.Errorf("verify: %s holds %q, want %q", s.fileName(i), got, s.content(i))
		}
	}
	if s.exec {
		if _, err := os.Stat(s.markerPath()); err != nil {
			return fmt.Errorf("verify: the exec did not run: %w", err)
		}
	}
	return nil
}

// drift edits the first three files (fewer when n is smaller), keeping
// their owner and mode, so that an apply must repair them.
func (s filesSpec) drift() (int, error) {
	k := min(3, s.n)
	for i := range k {
		f, err := os.OpenFile(s.fileName(i), os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return 0, fmt.Errorf("drift: %w", err)
		}
		_, err = f.WriteString("edited by hand\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, fmt.Errorf("drift: %w", err)
		}
	}
	return k, nil
}

// clean removes everything in dir, keeping dir.
func clean(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

// LinkPolicy is what a writing type does with a symbolic link planted at
// the path it writes.
type LinkPolicy int

const (
	// LinkReplaced: the link is replaced by the file (an atomic rename
	// over it); what it pointed to is never opened. file and scaffold.
	LinkReplaced LinkPolicy = iota + 1
	// LinkRefused: the resource fails, naming the link; nothing changes.
	// document (merging into a link's target is what must not happen, and
	// replacing it would drop the document others wrote).
	LinkRefused
)

// WriteCase is a resource type that writes a regular file, for RunLinks.
type WriteCase struct {
	// New returns a fresh resource that writes (creates or rewrites) the
	// regular file at path, and the Env to run it with; path's directory
	// exists.
	New func(t *testing.T, path string) (resources.Resource, *resources.Env)
	// LinkAtPath is what the type does with a link at path.
	LinkAtPath LinkPolicy
}

// nobody is the unprivileged user who owns the planted directories and
// links.
const nobody = 65534

// secret is the content of the root-only file the links point to.
const secret = "root-only secret\n"

// RunLinks is the suite every type that writes files runs (file,
// document, scaffold, archive's extract_parent, user homes...): a user who
// owns a directory plants symbolic links to a root-only file or directory,
// and applying (and noop) must never read, write, chmod or chown what they
// point to, nor show its content. It needs root (to hand directories and
// links to nobody) and skips otherwise.
//
//   - "link at the path": dir (nobody's) / NAME -> /elsewhere/secret (0600)
//     is replaced or refused, per c.LinkAtPath;
//   - "symlinked parent": dir (nobody's) / sub -> /elsewhere (0700, root's),
//     writing dir/sub/NAME fails with an error naming the link.
func RunLinks(t *testing.T, c WriteCase) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to hand directories and links to nobody")
	}
	t.Run("link at the path", func(t *testing.T) {
		secretDir, check := secretTree(t)
		home := ownedDir(t)
		path := filepath.Join(home, "config.json")
		plant(t, filepath.Join(secretDir, "config.json"), path)

		noop := execute(t, c, path, true)
		leaks(t, "noop", noop)
		check()
		out := execute(t, c, path, false)
		leaks(t, "apply", out)
		check()
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		switch c.LinkAtPath {
		case LinkReplaced:
			if out.Status != resources.StatusChanged || !fi.Mode().IsRegular() {
				t.Fatalf("apply: %s (%s), path is %v; want the link replaced by a file", out.Status, out.Message, fi.Mode())
			}
		case LinkRefused:
			if out.Status != resources.StatusFailed || !namesLink(out.Message) || !strings.Contains(out.Message, path) {
				t.Fatalf("apply: %s (%s); want a failure naming the symlink %s", out.Status, out.Message, path)
			}
			if noop.Status != resources.StatusFailed {
				t.Fatalf("noop: %s (%s); want the same failure as apply", noop.Status, noop.Message)
			}
			if fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("the refused link was changed: %v", fi.Mode())
			}
		default:
			t.Fatalf("WriteCase.LinkAtPath not set")
		}
	})
	t.Run("symlinked parent", func(t *testing.T) {
		secretDir, check := secretTree(t)
		home := ownedDir(t)
		link := filepath.Join(home, "sub")
		plant(t, secretDir, link)
		path := filepath.Join(link, "config.json")
		for _, noop := range []bool{true, false} {
			out := execute(t, c, path, noop)
			leaks(t, fmt.Sprintf("noop %v", noop), out)
			if out.Status != resources.StatusFailed || !strings.Contains(out.Message, link) || !namesLink(out.Message) {
				t.Fatalf("noop %v: %s (%s); want a failure naming the symlink %s", noop, out.Status, out.Message, link)
			}
			check()
		}
	})
}

// namesLink tells whether a message says a symbolic link is the problem.
func namesLink(msg string) bool {
	return strings.Contains(msg, "symlink") || strings.Contains(msg, "symbolic link")
}

func execute(t *testing.T, c WriteCase, path string, noop bool) resources.Outcome {
	t.Helper()
	res, env := c.New(t, path)
	e := resources.Env{}
	if env != nil {
		e = *env
	}
	e.Noop = noop
	return resources.Execute(context.Background(), res, &e)
}

// leaks fails t when an outcome shows the secret.
func leaks(t *testing.T, step string, out resources.Outcome) {
	t.Helper()
	if strings.Contains(out.Message+out.Diff, strings.TrimSpace(secret)) {
		t.Fatalf("%s shows the link target's content: %s\n%s", step, out.Message, out.Diff)
	}
}

// secretTree makes a root-only directory (0700) holding config.json (0600)
// and returns it with a check that fails t when anything in it changed.
func secretTree(t *testing.T) (string, func()) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "secret")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	before := describe(t, dir)
	return dir, func() {
		t.Helper()
		if after := describe(t, dir); after != before {
			t.Fatalf("the link's target changed:\nbefore: %s\nafter:  %s", before, after)
		}
	}
}

// describe lists dir's entries with mode, owner and content.
func describe(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "%v;", fi.Mode())
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := os.Lstat(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		content, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		fmt.Fprintf(&b, " %s %v %d:%d %q;", e.Name(), fi.Mode(), st.Uid, st.Gid, content)
	}
	return b.String()
}

// ownedDir makes a 0755 directory owned by nobody.
func ownedDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	return dir
}

// plant makes the symbolic link link -> target, owned by nobody.
func plant(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, nobody, nobody); err != nil {
		t.Fatal(err)
	}
}

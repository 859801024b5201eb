package archive

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/conformance"
)

// killedTree leaves in parent what an extraction into name killed midway
// leaves: its temporary tree, unlocked, holding part of the archive.
func killedTree(t *testing.T, parent, name string, files map[string]string) string {
	t.Helper()
	tmp := filepath.Join(parent, "."+name+".manifold-extract-killed")
	for p, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(tmp, p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, p), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return tmp
}

// TestInterruptedExtractionIsRedone: a worker killed while extracting
// leaves a temporary tree beside extract_parent; the next run is not
// stable: it removes the tree and extracts again, with or without creates,
// whether the kill came before anything was in place or halfway through
// merging into an existing directory (creates already there).
func TestInterruptedExtractionIsRedone(t *testing.T) {
	t.Parallel()
	data := makeTar(t, true, dir("app"), file("app/bin", "elf"), file("app/lib", "so"), file("app/ready", "1"))
	for _, tc := range []struct {
		name    string
		creates bool
		// placed is what the killed merge had already moved into dest.
		placed map[string]string
	}{
		{"killed before install, no creates", false, nil},
		{"killed midway through a merge, creates there", true, map[string]string{"app/ready": "1"}},
		{"killed midway through a merge, no creates", false, map[string]string{"app/ready": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, false, map[string][]byte{"/a.tgz": data})
			base := t.TempDir()
			name, dest := filepath.Join(base, "a.tgz"), filepath.Join(base, "opt")
			// The archive is in place (the version before this one renamed
			// it before extracting; a re-extraction has it too).
			if err := os.WriteFile(name, data, 0o600); err != nil {
				t.Fatal(err)
			}
			for p, body := range tc.placed {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dest, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dest, p), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tmp := killedTree(t, base, "opt", map[string]string{"app/bin": "elf", "app/lib": "s"})
			props := map[string]any{"url": srv.URL + "/a.tgz", "checksum": sum(data), "extract_parent": dest}
			if tc.creates {
				props["creates"] = filepath.Join(dest, "app/ready")
			}
			noop := resources.Execute(t.Context(), build(t, name, props), &resources.Env{Noop: true})
			if noop.Status != resources.StatusChanged || !strings.Contains(noop.Message, "leftover(s) of an interrupted extraction") {
				t.Fatalf("noop %+v", noop)
			}
			if _, err := os.Lstat(tmp); err != nil {
				t.Fatalf("noop removed the leftover: %v", err)
			}
			out := resources.Execute(t.Context(), build(t, name, props), &resources.Env{})
			if out.Status != resources.StatusChanged || !strings.Contains(out.Message, "extract into "+dest) {
				t.Fatalf("outcome %+v", out)
			}
			for p, want := range map[string]string{"app/bin": "elf", "app/lib": "so", "app/ready": "1"} {
				if b, err := os.ReadFile(filepath.Join(dest, p)); string(b) != want {
					t.Fatalf("%s = %q (%v), want %q", p, b, err, want)
				}
			}
			noLeftovers(t, base)
			if out := resources.Execute(t.Context(), build(t, name, props), &resources.Env{}); out.Status != resources.StatusStable {
				t.Fatalf("second run %+v", out)
			}
			if n := srv.hits.Load(); n != 0 {
				t.Fatalf("%d downloads, want 0 (the archive in place matches its checksum)", n)
			}
		})
	}
}

// TestKilledDownloadIsRedone: a worker killed after downloading, while
// extracting, left its temporary download and tree; the archive was never
// put in place, so the next run downloads and extracts again and removes
// both.
func TestKilledDownloadIsRedone(t *testing.T) {
	t.Parallel()
	data := makeZip(t, file("x", "1"))
	srv := newServer(t, false, map[string][]byte{"/x.zip": data})
	base := t.TempDir()
	name, dest := filepath.Join(base, "x.zip"), filepath.Join(base, "out")
	if err := os.WriteFile(filepath.Join(base, ".x.zip.manifold-0"), data[:10], 0o600); err != nil {
		t.Fatal(err)
	}
	old := os.Chtimes // the leftover download is older than a live writer's
	if err := old(filepath.Join(base, ".x.zip.manifold-0"), timeAgo(), timeAgo()); err != nil {
		t.Fatal(err)
	}
	killedTree(t, base, "out", map[string]string{"x": ""})
	props := map[string]any{"url": srv.URL + "/x.zip", "extract_parent": dest}
	if out := resources.Execute(t.Context(), build(t, name, props), &resources.Env{}); out.Status != resources.StatusChanged {
		t.Fatalf("outcome %+v", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "x")); string(b) != "1" {
		t.Fatalf("x = %q", b)
	}
	noLeftovers(t, base)
	if out := resources.Execute(t.Context(), build(t, name, props), &resources.Env{}); out.Status != resources.StatusStable || srv.hits.Load() != 1 {
		t.Fatalf("second run %+v, %d downloads", out, srv.hits.Load())
	}
}

// TestRefusedArchiveIsRefusedAgain: an archive whose extraction is refused
// (a ../ entry) leaves nothing behind, neither the archive file nor a
// tree, so every later run downloads it and refuses it again: failed, never
// stable. An archive already in place whose extraction fails is removed
// too.
func TestRefusedArchiveIsRefusedAgain(t *testing.T) {
	t.Parallel()
	data := makeTar(t, false, file("ok", "1"), file("../evil", "x"))
	srv := newServer(t, false, map[string][]byte{"/a.tar": data})
	base := t.TempDir()
	name, dest := filepath.Join(base, "a.tar"), filepath.Join(base, "out")
	props := map[string]any{"url": srv.URL + "/a.tar", "extract_parent": dest}
	for run := 1; run <= 2; run++ {
		out := resources.Execute(t.Context(), build(t, name, props), &resources.Env{})
		if out.Status != resources.StatusFailed || !errors.Is(out.Err, ErrEscape) {
			t.Fatalf("run %d: %+v", run, out)
		}
		if got := tree(t, base); got != ". drwx------ 0:0" && strings.Count(got, "\n") != 0 {
			t.Fatalf("run %d left:\n%s", run, got)
		}
		if n := srv.hits.Load(); n != int64(run) {
			t.Fatalf("run %d: %d downloads", run, n)
		}
	}
	// The same archive already in place (copied by hand, or by an older
	// version): its failed extraction removes it.
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	props["creates"] = filepath.Join(dest, "ok")
	if out := resources.Execute(t.Context(), build(t, name, props), &resources.Env{}); out.Status != resources.StatusFailed || !errors.Is(out.Err, ErrEscape) {
		t.Fatalf("in place: %+v", out)
	}
	if _, err := os.Lstat(name); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused archive was kept: %v", err)
	}
}

// TestLiveExtractionIsNotALeftover: the temporary tree of an extraction
// still running (its flock held) is not taken for a leftover.
func TestLiveExtractionIsNotALeftover(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	live := killedTree(t, base, "opt", map[string]string{"f": "x"})
	dead := killedTree(t, base, "opt", nil)
	dead = strings.Replace(dead, "killed", "dead", 1)
	if err := os.Mkdir(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	killedTree(t, base, "other", nil) // another extract_parent's
	os.Mkdir(filepath.Join(base, ".other.manifold-extract-1"), 0o700)
	f, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	parent, name, err := openDest(filepath.Join(base, "opt"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	got, err := leftovers(parent, name)
	if err != nil || len(got) != 1 || got[0] != filepath.Base(dead) {
		t.Fatalf("leftovers %v %v, want [%s]", got, err, filepath.Base(dead))
	}
}

// TestSymlinkedExtractParent: an extract_parent that is a symbolic link is
// refused, in noop too, whoever owns the link: it is neither followed
// (writing where it points) nor replaced by a directory.
func TestSymlinkedExtractParent(t *testing.T) {
	t.Parallel()
	data := makeTar(t, true, file("conf", "new"))
	srv := newServer(t, false, map[string][]byte{"/a.tgz": data})
	base := t.TempDir()
	target := filepath.Join(base, "real")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(base, "opt")
	if err := os.Symlink(target, dest); err != nil {
		t.Fatal(err)
	}
	a := map[string]any{"url": srv.URL + "/a.tgz", "extract_parent": dest}
	for _, noop := range []bool{true, false} {
		out := resources.Execute(t.Context(), build(t, filepath.Join(base, "a.tgz"), a), &resources.Env{Noop: noop})
		if out.Status != resources.StatusFailed || !errors.Is(out.Err, ErrLinkedParent) || !strings.Contains(out.Message, "extract_parent "+dest+" is a symlink to "+target) {
			t.Fatalf("noop %v: %+v", noop, out)
		}
	}
	if fi, err := os.Lstat(dest); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi, err)
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Fatalf("extracted through the link: %v", entries)
	}
	if srv.hits.Load() != 0 {
		t.Fatal("downloaded though the extraction was refused")
	}
	noLeftovers(t, base)
}

// TestLinks runs the suite of writing types: a link planted at an
// extracted file's path is replaced, never written through; a symlinked
// extract_parent fails naming the link.
func TestLinks(t *testing.T) {
	t.Parallel()
	data := makeTar(t, true, file("config.json", `{"new":true}`))
	srv := newServer(t, false, map[string][]byte{"/a.tgz": data})
	conformance.RunLinks(t, conformance.WriteCase{
		New: func(t *testing.T, path string) (resources.Resource, *resources.Env) {
			return build(t, filepath.Join(t.TempDir(), "a.tgz"), map[string]any{"url": srv.URL + "/a.tgz", "extract_parent": filepath.Dir(path)}), nil
		},
		LinkAtPath: conformance.LinkReplaced,
	})
}

func timeAgo() time.Time { return time.Now().Add(-time.Minute) }

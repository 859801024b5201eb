package file

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

// TestRecheckTrustsTheWrite: the check after a write of a file's content
// (the engine's re-check) takes the content as right without reading it
// while an lstat shows the very file written, unchanged; any edit after
// the write (in place and of the same size, a replacement, a chmod) is
// read and found, however soon after the write it comes. Not parallel:
// it counts the type's reads.
func TestRecheckTrustsTheWrite(t *testing.T) {
	ctx := context.Background()
	env := &resources.Env{}
	dir := t.TempDir()
	props := map[string]any{"content": "managed\n", "mode": "0644"}
	counts := func() (int64, int64) { return checkReads.Load(), writtenChecks.Load() }
	expect := func(t *testing.T, r0, w0, reads, written int64) {
		t.Helper()
		r1, w1 := counts()
		if r1-r0 != reads || w1-w0 != written {
			t.Fatalf("%d reads, %d checks from the write; want %d and %d", r1-r0, w1-w0, reads, written)
		}
	}

	t.Run("once, then read again", func(t *testing.T) {
		p := filepath.Join(dir, "a")
		writeFile(t, p, "storm!!\n", 0o644)
		f := build(t, p, "", props)
		r0, w0 := counts()
		if out := resources.Execute(ctx, f, env); out.Status != resources.StatusChanged || out.Message != "updated content" {
			t.Fatalf("outcome %+v", out)
		}
		expect(t, r0, w0, 1, 1)
		r0, w0 = counts()
		if r, err := f.CheckApply(ctx, env, false); err != nil || r.Changed {
			t.Fatalf("second check %+v %v", r, err)
		}
		expect(t, r0, w0, 1, 0) // the write's verdict serves one check
	})

	t.Run("a created file", func(t *testing.T) {
		p := filepath.Join(dir, "new")
		f := build(t, p, "", props)
		r0, w0 := counts()
		if out := resources.Execute(ctx, f, env); out.Status != resources.StatusChanged || out.Message != "created" {
			t.Fatalf("outcome %+v", out)
		}
		expect(t, r0, w0, 0, 1)
	})

	t.Run("edited in place right after the write", func(t *testing.T) {
		// Same size, same inode, at once: only the times tell, so this
		// is the case a coarse clock would miss; 200 rounds.
		for i := range 200 {
			p := filepath.Join(dir, "b"+strconv.Itoa(i))
			writeFile(t, p, "storm!!\n", 0o644)
			f := build(t, p, "", props)
			if r, err := f.CheckApply(ctx, env, true); err != nil || !r.Changed {
				t.Fatalf("apply %+v %v", r, err)
			}
			fd, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fd.Write([]byte("storm!!\n")); err != nil {
				t.Fatal(err)
			}
			if err := fd.Close(); err != nil {
				t.Fatal(err)
			}
			r0, w0 := counts()
			r, err := f.CheckApply(ctx, env, false)
			if err != nil || !r.Changed || r.Message != "update content" {
				t.Fatalf("round %d: check after the edit %+v %v, want update content", i, r, err)
			}
			expect(t, r0, w0, 1, 0)
		}
	})

	t.Run("replaced after the write", func(t *testing.T) {
		p := filepath.Join(dir, "c")
		writeFile(t, p, "storm!!\n", 0o644)
		f := build(t, p, "", props)
		if r, err := f.CheckApply(ctx, env, true); err != nil || !r.Changed {
			t.Fatalf("apply %+v %v", r, err)
		}
		tmp := filepath.Join(dir, ".c.other")
		writeFile(t, tmp, "storm!!\n", 0o644)
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
		r0, w0 := counts()
		if r, err := f.CheckApply(ctx, env, false); err != nil || r.Message != "update content" {
			t.Fatalf("check %+v %v, want update content", r, err)
		}
		expect(t, r0, w0, 1, 0)
	})

	t.Run("chmodded after the write", func(t *testing.T) {
		p := filepath.Join(dir, "d")
		writeFile(t, p, "storm!!\n", 0o644)
		f := build(t, p, "", props)
		if r, err := f.CheckApply(ctx, env, true); err != nil || !r.Changed {
			t.Fatalf("apply %+v %v", r, err)
		}
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
		r0, w0 := counts()
		if r, err := f.CheckApply(ctx, env, false); err != nil || r.Message != "set mode 0600 → 0644" {
			t.Fatalf("check %+v %v, want the mode only", r, err)
		}
		expect(t, r0, w0, 1, 0)
	})

	t.Run("a batch", func(t *testing.T) {
		var members []resources.Batcher
		var files []*File
		for i := range 5 {
			p := filepath.Join(dir, "e"+strconv.Itoa(i))
			writeFile(t, p, "storm!!\n", 0o644)
			f := build(t, p, "", props)
			if r, err := f.CheckApply(ctx, env, false); err != nil || !r.Changed {
				t.Fatalf("check %+v %v", r, err)
			}
			members = append(members, f)
			files = append(files, f)
		}
		if _, err := members[0].ApplyBatch(ctx, env, members); err != nil {
			t.Fatal(err)
		}
		// The last one edited after the batch's commit: read, found.
		if err := os.WriteFile(files[4].Path, []byte("storm!!\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r0, w0 := counts()
		for i, f := range files {
			r, err := f.CheckApply(ctx, env, false)
			if err != nil || r.Changed != (i == 4) {
				t.Fatalf("member %d: re-check %+v %v", i, r, err)
			}
		}
		expect(t, r0, w0, 1, 4)
	})

	t.Run("a source is always read", func(t *testing.T) {
		// The source may change between the write and the re-check.
		work := t.TempDir()
		if err := os.WriteFile(filepath.Join(work, "src"), []byte("managed\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "s")
		writeFile(t, p, "storm!!\n", 0o644)
		f := build(t, p, "", map[string]any{"source": "src"})
		senv := &resources.Env{WorkDir: work}
		r0, w0 := counts()
		if out := resources.Execute(ctx, f, senv); out.Status != resources.StatusChanged {
			t.Fatalf("outcome %+v", out)
		}
		expect(t, r0, w0, 2, 0)
	})
}

package file

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/manifold-run/manifold/resources"
)

// TestApplyReusesTheCheck: an apply right after the check that found a
// file drifted writes it without reading and comparing its content again
// (the engine reports the check's diff); the engine's re-check takes the
// file the apply wrote as right without reading it (TestRecheckTrustsTheWrite). A file changed between check and apply is read again, so its
// apply reports what it finds: nothing to do when another writer put the
// desired content there meanwhile. Not parallel: it counts the type's
// reads.
func TestApplyReusesTheCheck(t *testing.T) {
	ctx := context.Background()
	env := &resources.Env{}
	dir := t.TempDir()
	props := map[string]any{"content": "managed\n", "mode": "0644"}

	t.Run("unchanged since the check", func(t *testing.T) {
		p := filepath.Join(dir, "a")
		writeFile(t, p, "storm!!\n", 0o644)
		f := build(t, p, "", props)
		r0, w0 := checkReads.Load(), writtenChecks.Load()
		out := resources.Execute(ctx, f, env) // check, apply, re-check
		if out.Status != resources.StatusChanged || out.Message != "updated content" || out.Diff == "" {
			t.Fatalf("outcome %+v", out)
		}
		if got, w := checkReads.Load()-r0, writtenChecks.Load()-w0; got != 1 || w != 1 {
			t.Fatalf("%d reads, %d re-checks from the write, want 1 (the check; not the apply, not the re-check) and 1", got, w)
		}
		if b, _ := os.ReadFile(p); string(b) != "managed\n" {
			t.Fatalf("content %q", b)
		}
	})

	t.Run("changed between check and apply", func(t *testing.T) {
		p := filepath.Join(dir, "b")
		writeFile(t, p, "storm!!\n", 0o644)
		f := build(t, p, "", props)
		if r, err := f.CheckApply(ctx, env, false); err != nil || !r.Changed {
			t.Fatalf("check %+v %v", r, err)
		}
		writeFile(t, p, "managed\n", 0o644) // another writer repaired it
		r0 := checkReads.Load()
		r, err := f.CheckApply(ctx, env, true)
		if err != nil || r.Changed {
			t.Fatalf("apply %+v %v, want nothing to do", r, err)
		}
		if got := checkReads.Load() - r0; got != 1 {
			t.Fatalf("%d reads, want 1", got)
		}
	})

	t.Run("only the mode drifted", func(t *testing.T) {
		p := filepath.Join(dir, "c")
		writeFile(t, p, "managed\n", 0o600)
		f := build(t, p, "", props)
		r0 := checkReads.Load()
		out := resources.Execute(ctx, f, env)
		if out.Status != resources.StatusChanged || out.Message != "set mode 0600 → 0644" {
			t.Fatalf("outcome %+v", out)
		}
		if got := checkReads.Load() - r0; got != 2 {
			t.Fatalf("%d reads, want 2", got)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
			t.Fatalf("mode %v", fi.Mode())
		}
	})

	t.Run("a batch", func(t *testing.T) {
		var members []resources.Batcher
		var paths []string
		for _, name := range []string{"d", "e", "f"} {
			p := filepath.Join(dir, name)
			writeFile(t, p, "storm!!\n", 0o644)
			f := build(t, p, "", props)
			if r, err := f.CheckApply(ctx, env, false); err != nil || !r.Changed {
				t.Fatalf("check %+v %v", r, err)
			}
			members = append(members, f)
			paths = append(paths, p)
		}
		r0 := checkReads.Load()
		results, err := members[0].ApplyBatch(ctx, env, members)
		if err != nil {
			t.Fatal(err)
		}
		if got := checkReads.Load() - r0; got != 0 {
			t.Fatalf("%d reads in the batch, want 0", got)
		}
		for i, r := range results {
			if !r.Changed || r.Message != "updated content" {
				t.Fatalf("member %d: %+v", i, r)
			}
			if b, _ := os.ReadFile(paths[i]); string(b) != "managed\n" {
				t.Fatalf("%s: %q", paths[i], b)
			}
		}
	})

	t.Run("a stable check leaves nothing to reuse", func(t *testing.T) {
		p := filepath.Join(dir, "g")
		writeFile(t, p, "storm!!\n", 0o644)
		f := build(t, p, "", props)
		if r, _ := f.CheckApply(ctx, env, false); !r.Changed {
			t.Fatal("not drifted")
		}
		writeFile(t, p, "managed\n", 0o644)
		if r, _ := f.CheckApply(ctx, env, false); r.Changed {
			t.Fatal("drifted")
		}
		if f.drifted.Load() != nil {
			t.Fatal("a stable check kept a verdict")
		}
	})
}

package file

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/manifold-run/manifold/resources"
	"github.com/manifold-run/manifold/resources/safefs"
)

// TestApplyBatchGroupsWrites: a batch of files ends as executing each alone
// would (outcomes and the files themselves), with the content writes
// between two other changes made durable by one group commit each: an
// attribute change is applied in its place, after the writes staged
// before it; directories and removals end a batch (a later file's check
// may need the directory) and are executed alone, in their place.
func TestApplyBatchGroupsWrites(t *testing.T) {
	var sizes []int
	commitGroup = func(g *safefs.Group) []error {
		sizes = append(sizes, g.Len())
		return g.Commit()
	}
	defer func() { commitGroup = (*safefs.Group).Commit }()

	type member struct {
		name, ensure string
		props        map[string]any
		setup        func(t *testing.T, path string)
	}
	content := func(s string) map[string]any { return map[string]any{"content": s, "mode": "0640"} }
	members := []member{
		{name: "a", props: content("a\n")},
		{name: "b", props: content("b\n"), setup: func(t *testing.T, p string) { writeFile(t, p, "old b\n", 0o600) }},
		{name: "c", props: content("c\n")},
		{name: "e", props: map[string]any{"mode": "0600"}, setup: func(t *testing.T, p string) { writeFile(t, p, "keep", 0o644) }},
		{name: "g", props: content("g\n")},
		{name: "h", props: content("h\n")},
		{name: "f", ensure: "absent", setup: func(t *testing.T, p string) { writeFile(t, p, "gone", 0o644) }},
		{name: "i", props: content("i\n")},
		{name: "stable", props: content("same\n"), setup: func(t *testing.T, p string) { writeFile(t, p, "same\n", 0o640) }},
		{name: "sub", ensure: "directory", props: map[string]any{"mode": "0750"}},
		// Its directory is made by the member before: its check fails in
		// the batch's check phase, which closes the batch; it then runs
		// alone, after the batch, and converges as it would alone.
		{name: "sub/d", props: content("d\n")},
	}
	// The same members run alone in one directory and as a batch in
	// another must leave the same files and outcomes.
	run := func(batched bool) (string, []resources.Outcome) {
		dir := t.TempDir()
		var res []*File
		for _, m := range members {
			p := filepath.Join(dir, m.name)
			if m.setup != nil {
				m.setup(t, p)
			}
			res = append(res, build(t, p, m.ensure, m.props))
		}
		ctx := context.Background()
		var outs []resources.Outcome
		if !batched {
			for _, f := range res {
				outs = append(outs, resources.Execute(ctx, f, &resources.Env{}))
			}
			return dir, outs
		}
		// Batches as the worker forms them: consecutive members of the
		// batch key, two at least.
		for i := 0; i < len(res); {
			n := i
			for n < len(res) {
				if k, _ := res[n].BatchKey(ctx, &resources.Env{}); k != BatchKey {
					break
				}
				n++
			}
			if n-i < 2 {
				outs = append(outs, resources.Execute(ctx, res[i], &resources.Env{}))
				i++
				continue
			}
			var b resources.Batch
			for _, f := range res[i:n] {
				b.Check(ctx, f, &resources.Env{})
			}
			if err := b.Apply(ctx); err != nil {
				t.Fatalf("batch: %v", err)
			}
			for k := range n - i {
				outs = append(outs, b.Finish(ctx, k))
			}
			i = n
		}
		return dir, outs
	}
	aloneDir, alone := run(false)
	sizes = nil
	batchDir, batched := run(true)
	if want := []int{3, 2}; !slices.Equal(sizes, want) {
		t.Fatalf("group commits of %v files, want %v", sizes, want)
	}
	for i, m := range members {
		a, b := alone[i], batched[i]
		if a.Status != b.Status || a.Message != b.Message || a.Err != nil || b.Err != nil {
			t.Errorf("%s: alone %s %q %v, batched %s %q %v", m.name, a.Status, a.Message, a.Err, b.Status, b.Message, b.Err)
		}
		if sa, sb := snapshot(t, filepath.Join(aloneDir, m.name)), snapshot(t, filepath.Join(batchDir, m.name)); sa != sb {
			t.Errorf("%s: alone %s, batched %s", m.name, sa, sb)
		}
	}
	if batched[0].Status != resources.StatusChanged || batched[8].Status != resources.StatusStable || batched[10].Status != resources.StatusChanged {
		t.Fatalf("outcomes: %+v", batched)
	}
	entries, _ := os.ReadDir(batchDir)
	if len(entries) != 9 { // f removed, sub/d in sub
		t.Fatalf("%d entries: %v", len(entries), entries)
	}
}

// TestApplyBatchFailureFallsBack: a write that fails ends the batch with
// the failing file named, no temporary file is left behind, and the
// engine then applies each member alone: the others still converge and
// the failing one has its own error.
func TestApplyBatchFailureFallsBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ok1 := build(t, filepath.Join(dir, "ok1"), "", map[string]any{"content": "1"})
	// A directory where the file should be: its check already fails, so
	// the batch closes at it; a missing parent's write fails at apply.
	bad := build(t, filepath.Join(dir, "missing", "x"), "", map[string]any{"content": "x"})
	ok2 := build(t, filepath.Join(dir, "ok2"), "", map[string]any{"content": "2"})
	ctx := context.Background()
	var b resources.Batch
	for _, f := range []*File{ok1, ok2} {
		b.Check(ctx, f, &resources.Env{})
	}
	// The parent of bad goes missing between the checks and the apply.
	if err := os.Mkdir(filepath.Join(dir, "missing"), 0o755); err != nil {
		t.Fatal(err)
	}
	b.Check(ctx, bad, &resources.Env{})
	if err := os.Remove(filepath.Join(dir, "missing")); err != nil {
		t.Fatal(err)
	}
	err := b.Apply(ctx)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "missing", "x")) {
		t.Fatalf("batch error %v, want one naming the failing file", err)
	}
	for i, want := range []resources.Status{resources.StatusChanged, resources.StatusChanged, resources.StatusFailed} {
		if o := b.Finish(ctx, i); o.Status != want {
			t.Errorf("member %d: %s %q, want %s", i, o.Status, o.Message, want)
		}
	}
	for name, want := range map[string]string{"ok1": "1", "ok2": "2"} {
		if got, _ := os.ReadFile(filepath.Join(dir, name)); string(got) != want {
			t.Errorf("%s: %q", name, got)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Fatalf("left behind: %v", entries)
	}
}

// TestDecodeDirect: properties of their plain types decode as through
// JSON; anything else (an unknown property, a number, null) falls back to
// resources.DecodeProperties and its errors.
func TestDecodeDirect(t *testing.T) {
	t.Parallel()
	for _, props := range []map[string]any{
		nil,
		{},
		{"content": "x\n", "mode": "0644", "owner": "nobody", "group": "nogroup"},
		{"content": "", "show_diff": false, "sensitive": true, "links": "manage"},
		{"source": "files/a", "force": false, "show_diff": true},
		{"owner": 65534, "group": uint64(65534)},             // numbers: JSON path
		{"content": nil},                                     // null: JSON path
		{"mdoe": "0644"},                                     // unknown: JSON's error
		{"content": 3},                                       // wrong type: JSON's error
		{"owner": -1},                                        // negative id: JSON's error
		{"content": "x", "sensitive": "yes", "mode": "0600"}, // wrong type after good ones
	} {
		var viaJSON Properties
		jsonErr := resources.DecodeProperties(props, &viaJSON)
		got, err := New(resources.Spec{Type: Type, Name: "/x", Properties: props})
		if (err == nil) != (jsonErr == nil) || (err != nil && !strings.Contains(err.Error(), jsonErr.Error())) {
			t.Errorf("%v: error %v, JSON's %v", props, err, jsonErr)
			continue
		}
		if err == nil && !reflect.DeepEqual(got.(*File).Properties, viaJSON) {
			t.Errorf("%v: %+v, JSON's %+v", props, got.(*File).Properties, viaJSON)
		}
	}
}

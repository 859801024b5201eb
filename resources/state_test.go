package resources

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testStateStore is the contract every StateStore meets.
func testStateStore(t *testing.T, s StateStore) {
	ctx := context.Background()
	if _, ok, err := s.Get(ctx, "document#/etc/app.json"); ok || err != nil {
		t.Fatalf("Get missing = %v, %v", ok, err)
	}
	if err := s.Put(ctx, "document#/etc/app.json", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "document#/etc/app.json", []byte("two")); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Get(ctx, "document#/etc/app.json")
	if err != nil || !ok || string(got) != "two" {
		t.Fatalf("Get = %q, %v, %v", got, ok, err)
	}
	got[0] = 'X' // the caller's copy
	if again, _, _ := s.Get(ctx, "document#/etc/app.json"); string(again) != "two" {
		t.Fatalf("store shares its bytes: %q", again)
	}
	if err := s.Put(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.Get(ctx, "empty"); err != nil || !ok || len(got) != 0 {
		t.Fatalf("Get empty = %q, %v, %v", got, ok, err)
	}

	limit := bytes.Repeat([]byte("v"), MaxStateValue)
	if err := s.Put(ctx, "big", limit); err != nil {
		t.Fatalf("Put at the limit: %v", err)
	}
	if got, _, _ := s.Get(ctx, "big"); len(got) != MaxStateValue {
		t.Fatalf("Get at the limit: %d bytes", len(got))
	}
	if err := s.Put(ctx, "big", append(limit, 'v')); !errors.Is(err, ErrStateTooLarge) {
		t.Fatalf("Put past the limit = %v", err)
	}
	if got, _, _ := s.Get(ctx, "big"); len(got) != MaxStateValue {
		t.Fatalf("a refused Put changed the value: %d bytes", len(got))
	}

	longest := strings.Repeat("k", MaxStateKey)
	if err := s.Put(ctx, longest, []byte("1")); err != nil {
		t.Fatalf("Put with the longest key: %v", err)
	}
	if v, ok, _ := s.Get(ctx, longest); !ok || string(v) != "1" {
		t.Fatalf("Get with the longest key = %q, %v", v, ok)
	}
	for _, bad := range []string{"", longest + "k"} {
		if err := s.Put(ctx, bad, []byte("x")); !errors.Is(err, ErrInvalidStateKey) {
			t.Errorf("Put(len %d) = %v", len(bad), err)
		}
		if _, _, err := s.Get(ctx, bad); !errors.Is(err, ErrInvalidStateKey) {
			t.Errorf("Get(len %d) = %v", len(bad), err)
		}
		if err := s.Delete(ctx, bad); !errors.Is(err, ErrInvalidStateKey) {
			t.Errorf("Delete(len %d) = %v", len(bad), err)
		}
	}

	if err := s.Delete(ctx, "document#/etc/app.json"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Get(ctx, "document#/etc/app.json"); ok || err != nil {
		t.Fatalf("Get deleted = %v, %v", ok, err)
	}
	if err := s.Delete(ctx, "document#/etc/app.json"); err != nil {
		t.Fatalf("Delete missing = %v", err)
	}
}

func TestMemoryState(t *testing.T) {
	t.Parallel()
	testStateStore(t, &MemoryState{})
}

func TestFileState(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "state", "nested")
	s, err := NewFileState(dir)
	if err != nil {
		t.Fatal(err)
	}
	testStateStore(t, s)

	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state dir: %v, %v", fi, err)
	}
	ctx := context.Background()
	// Keys that look like paths stay inside the directory.
	for _, key := range []string{"../escape", "..", ".", "/etc/passwd", "a/../../b"} {
		if err := s.Put(ctx, key, []byte(key)); err != nil {
			t.Fatalf("Put(%q): %v", key, err)
		}
		if v, ok, _ := s.Get(ctx, key); !ok || string(v) != key {
			t.Fatalf("Get(%q) = %q, %v", key, v, ok)
		}
	}
	var outside []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if !d.IsDir() && filepath.Dir(p) != dir {
			outside = append(outside, p)
		}
		return nil
	})
	if len(outside) > 0 {
		t.Fatalf("files outside the state dir: %v", outside)
	}
	// A second store on the same dir sees the values: they are on disk.
	s2, _ := NewFileState(dir)
	if got, ok, err := s2.Get(ctx, "../escape"); err != nil || !ok || string(got) != "../escape" {
		t.Fatalf("reopened Get = %q, %v, %v", got, ok, err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	if _, err := NewFileState(""); err == nil {
		t.Fatal("NewFileState(\"\") succeeded")
	}
}

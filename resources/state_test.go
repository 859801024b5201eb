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

func TestValidateStateKey(t *testing.T) {
	t.Parallel()
	for key, ok := range map[string]bool{
		"document.etc_app_conf":            true,
		"a":                                true,
		"A-b_c=d.e":                        true,
		strings.Repeat("k", MaxStateKey):   true,
		strings.Repeat("k", MaxStateKey+1): false,
		"":                                 false,
		".hidden":                          false,
		"trailing.":                        false,
		"a..b":                             false,
		"../etc/passwd":                    false,
		"a/b":                              false,
		"sp ace":                           false,
		"star*":                            false,
		"ünï":                              false,
	} {
		err := ValidateStateKey(key)
		if ok != (err == nil) {
			t.Errorf("ValidateStateKey(%q) = %v, want ok=%v", key, err, ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidStateKey) {
			t.Errorf("ValidateStateKey(%q) = %v, not ErrInvalidStateKey", key, err)
		}
	}
}

// testStateStore is the contract every StateStore meets.
func testStateStore(t *testing.T, s StateStore) {
	ctx := context.Background()
	if _, err := s.Get(ctx, "k"); !errors.Is(err, ErrStateNotFound) {
		t.Fatalf("Get missing = %v", err)
	}
	if err := s.Put(ctx, "k", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "k", []byte("two")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "k")
	if err != nil || string(got) != "two" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	got[0] = 'X' // the caller's copy
	if again, _ := s.Get(ctx, "k"); string(again) != "two" {
		t.Fatalf("store shares its bytes: %q", again)
	}
	if err := s.Put(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "empty"); err != nil || len(got) != 0 {
		t.Fatalf("Get empty = %q, %v", got, err)
	}

	limit := bytes.Repeat([]byte("v"), MaxStateValue)
	if err := s.Put(ctx, "big", limit); err != nil {
		t.Fatalf("Put at the limit: %v", err)
	}
	if got, _ := s.Get(ctx, "big"); len(got) != MaxStateValue {
		t.Fatalf("Get at the limit: %d bytes", len(got))
	}
	if err := s.Put(ctx, "big", append(limit, 'v')); !errors.Is(err, ErrStateTooLarge) {
		t.Fatalf("Put past the limit = %v", err)
	}
	if got, _ := s.Get(ctx, "big"); len(got) != MaxStateValue {
		t.Fatalf("a refused Put changed the value: %d bytes", len(got))
	}

	for _, bad := range []string{"../escape", ""} {
		if err := s.Put(ctx, bad, []byte("x")); !errors.Is(err, ErrInvalidStateKey) {
			t.Errorf("Put(%q) = %v", bad, err)
		}
		if _, err := s.Get(ctx, bad); !errors.Is(err, ErrInvalidStateKey) {
			t.Errorf("Get(%q) = %v", bad, err)
		}
		if err := s.Delete(ctx, bad); !errors.Is(err, ErrInvalidStateKey) {
			t.Errorf("Delete(%q) = %v", bad, err)
		}
	}

	if err := s.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, ErrStateNotFound) {
		t.Fatalf("Get deleted = %v", err)
	}
	if err := s.Delete(ctx, "k"); err != nil {
		t.Fatalf("Delete missing = %v", err)
	}
}

func TestMemoryState(t *testing.T) {
	t.Parallel()
	testStateStore(t, &MemoryState{})
}

func TestFileState(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state", "nested")
	s, err := NewFileState(dir)
	if err != nil {
		t.Fatal(err)
	}
	testStateStore(t, s)

	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state dir: %v, %v", fi, err)
	}
	// A second store on the same dir sees the values: it is on disk.
	if err := s.Put(context.Background(), "persist", []byte("yes")); err != nil {
		t.Fatal(err)
	}
	s2, _ := NewFileState(dir)
	if got, err := s2.Get(context.Background(), "persist"); err != nil || string(got) != "yes" {
		t.Fatalf("reopened Get = %q, %v", got, err)
	}
	// No temporary files are left behind, and nothing escaped the dir.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "..", "escape")); err == nil {
		t.Fatal("a key escaped the state dir")
	}
	if _, err := NewFileState(""); err == nil {
		t.Fatal("NewFileState(\"\") succeeded")
	}
}

package resources

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
)

// MaxStateKey is the longest state key, in bytes.
const MaxStateKey = 1024

// MaxStateValue is the largest state value MemoryState and FileState
// accept, in bytes (1 MiB, NATS's default maximum payload, so a KV-backed
// store can hold any value these accept).
const MaxStateValue = 1 << 20

// StateStore keeps small values a resource needs on its next run on the
// same host (the last-applied document of a document resource). Keys are
// chosen by the resource type ("document#/etc/app.json"); the store scopes
// them to the host. Implementations are safe for concurrent use:
// MemoryState, FileState, and a NATS KV bucket on workers.
type StateStore interface {
	// Get returns the value of key; ok is false when there is none.
	Get(ctx context.Context, key string) (val []byte, ok bool, err error)
	// Put stores val under key, replacing any previous value.
	Put(ctx context.Context, key string, val []byte) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// checkStateKey refuses an empty key or one over MaxStateKey bytes.
func checkStateKey(key string) error {
	if key == "" || len(key) > MaxStateKey {
		return fmt.Errorf("%w: length %d, want 1 to %d bytes", ErrInvalidStateKey, len(key), MaxStateKey)
	}
	return nil
}

func checkPut(key string, value []byte) error {
	if err := checkStateKey(key); err != nil {
		return err
	}
	if len(value) > MaxStateValue {
		return fmt.Errorf("%w: %q: %d bytes, limit %d", ErrStateTooLarge, key, len(value), MaxStateValue)
	}
	return nil
}

// MemoryState is a StateStore in memory, for tests and one-shot runs. The
// zero value is ready to use.
type MemoryState struct {
	mu sync.Mutex
	m  map[string][]byte
}

var _ StateStore = (*MemoryState)(nil)

// Get returns a copy of key's value.
func (s *MemoryState) Get(_ context.Context, key string) ([]byte, bool, error) {
	if err := checkStateKey(key); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	if !ok {
		return nil, false, nil
	}
	return append([]byte{}, v...), true, nil
}

// Put stores a copy of value.
func (s *MemoryState) Put(_ context.Context, key string, value []byte) error {
	if err := checkPut(key, value); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[key] = append([]byte{}, value...)
	return nil
}

// Delete removes key.
func (s *MemoryState) Delete(_ context.Context, key string) error {
	if err := checkStateKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

// maxStateFileName bounds the file name FileState derives from a key;
// longer names are replaced by the key's SHA-256.
const maxStateFileName = 200

// FileState is a StateStore keeping one file per key in a directory (a
// worker's state dir). The file name is the key path-escaped ("/" and "#"
// cannot escape the directory), or its SHA-256 when that is long. Writes
// are atomic: a temporary file in the same directory, synced, then renamed
// over the key's file, so a reader or a crash sees the old value or the new
// one, never half of one.
type FileState struct {
	dir string
}

var _ StateStore = (*FileState)(nil)

// NewFileState returns a store in dir, creating it (mode 0700) when
// missing.
func NewFileState(dir string) (*FileState, error) {
	if dir == "" {
		return nil, errors.New("state: empty directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return &FileState{dir: dir}, nil
}

func (s *FileState) path(key string) string {
	name := url.PathEscape(key)
	if len(name) > maxStateFileName || name[0] == '.' {
		sum := sha256.Sum256([]byte(key))
		name = "sha256-" + hex.EncodeToString(sum[:])
	}
	return filepath.Join(s.dir, name)
}

// Get reads key's file.
func (s *FileState) Get(_ context.Context, key string) ([]byte, bool, error) {
	if err := checkStateKey(key); err != nil {
		return nil, false, err
	}
	b, err := os.ReadFile(s.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("state: %w", err)
	}
	return b, true, nil
}

// Put writes key's file atomically (mode 0600).
func (s *FileState) Put(_ context.Context, key string, value []byte) error {
	if err := checkPut(key, value); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	_, err = tmp.Write(value)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path(key))
	}
	if err != nil {
		return fmt.Errorf("state: put %q: %w", key, err)
	}
	return nil
}

// Delete removes key's file.
func (s *FileState) Delete(_ context.Context, key string) error {
	if err := checkStateKey(key); err != nil {
		return err
	}
	if err := os.Remove(s.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}

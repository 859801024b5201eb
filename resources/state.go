package resources

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// MaxStateKey is the longest state key, in bytes.
const MaxStateKey = 200

// MaxStateValue is the largest state value, in bytes (1 MiB, NATS's default
// maximum payload, so a KV-backed store can hold any value another store
// accepts).
const MaxStateValue = 1 << 20

// StateStore is the per-host state a type keeps between runs, reachable from
// Env.State. Keys are valid NATS KV keys and file names (see
// ValidateStateKey); values are at most MaxStateValue bytes. Implementations
// are safe for concurrent use: MemoryState, FileState, and a NATS KV bucket
// on workers.
type StateStore interface {
	// Get returns the value of key, or an error wrapping ErrStateNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put stores value under key, replacing any previous value.
	Put(ctx context.Context, key string, value []byte) error
	// Delete removes key; removing a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// ValidateStateKey checks a state key: 1 to MaxStateKey bytes of ASCII
// letters, digits, '-', '_', '=' and '.', not starting or ending with '.'
// and without "..". Such a key is a NATS KV key (dots separate tokens) and a
// safe file name. Errors wrap ErrInvalidStateKey.
func ValidateStateKey(key string) error {
	if key == "" || len(key) > MaxStateKey {
		return fmt.Errorf("%w: %q: length %d, want 1 to %d bytes", ErrInvalidStateKey, key, len(key), MaxStateKey)
	}
	if key[0] == '.' || key[len(key)-1] == '.' {
		return fmt.Errorf("%w: %q: starts or ends with '.'", ErrInvalidStateKey, key)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '=':
		case c == '.':
			if key[i-1] == '.' {
				return fmt.Errorf("%w: %q: empty token (\"..\")", ErrInvalidStateKey, key)
			}
		default:
			return fmt.Errorf("%w: %q: character %q not allowed (letters, digits, - _ = .)", ErrInvalidStateKey, key, c)
		}
	}
	return nil
}

func checkPut(key string, value []byte) error {
	if err := ValidateStateKey(key); err != nil {
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
func (s *MemoryState) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ValidateStateKey(key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrStateNotFound, key)
	}
	return append([]byte(nil), v...), nil
}

// Put stores a copy of value.
func (s *MemoryState) Put(ctx context.Context, key string, value []byte) error {
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
func (s *MemoryState) Delete(ctx context.Context, key string) error {
	if err := ValidateStateKey(key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

// FileState is a StateStore keeping one file per key in a directory (a
// worker's state dir). Writes are atomic: a temporary file in the same
// directory, synced, then renamed over the key's file, so a reader or a
// crash sees the old value or the new one, never half of one.
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

// Get reads key's file.
func (s *FileState) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ValidateStateKey(key); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(s.dir, key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %q", ErrStateNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return b, nil
}

// Put writes key's file atomically (mode 0600).
func (s *FileState) Put(ctx context.Context, key string, value []byte) error {
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
		err = os.Rename(tmp.Name(), filepath.Join(s.dir, key))
	}
	if err != nil {
		return fmt.Errorf("state: put %q: %w", key, err)
	}
	return nil
}

// Delete removes key's file.
func (s *FileState) Delete(ctx context.Context, key string) error {
	if err := ValidateStateKey(key); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(s.dir, key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}

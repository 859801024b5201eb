package document

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
)

// Store keeps last-applied documents. resources.StateStore (Env.State)
// satisfies it; FileStore is the fallback when Env.State is nil.
type Store interface {
	Get(ctx context.Context, key string) (val []byte, ok bool, err error)
	Put(ctx context.Context, key string, val []byte) error
	Delete(ctx context.Context, key string) error
}

// maxFileName bounds the file name FileStore derives from a key; longer
// keys are stored under their SHA-256.
const maxFileName = 200

// FileStore is a Store of files under Dir/Host/, one per key, written
// atomically (a temporary file renamed over the old one). It is the
// last-applied store of the embedded mode, whose NATS server lives only as
// long as the command.
type FileStore struct {
	// Dir is the state directory; see DefaultStateDir.
	Dir string
	// Host scopes the keys, so one directory can serve several hosts (a
	// shared home directory). Defaults to os.Hostname().
	Host string
}

var _ Store = (*FileStore)(nil)

// DefaultStateDir is where FileStore keeps its files when Config.StateDir is
// empty: $MANIFOLD_STATE_DIR, else /var/lib/manifold/last-applied for root,
// else $XDG_STATE_HOME/manifold/last-applied (~/.local/state/manifold/...).
func DefaultStateDir() string {
	if d := os.Getenv("MANIFOLD_STATE_DIR"); d != "" {
		return filepath.Join(d, "last-applied")
	}
	if os.Geteuid() == 0 {
		return "/var/lib/manifold/last-applied"
	}
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "manifold", "last-applied")
}

func (s *FileStore) path(key string) (string, error) {
	host := s.Host
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("last-applied store: host name: %w", err)
		}
		host = h
	}
	name := url.PathEscape(key)
	if len(name) > maxFileName || name == "." || name == ".." {
		sum := sha256.Sum256([]byte(key))
		name = hex.EncodeToString(sum[:])
	}
	return filepath.Join(s.Dir, url.PathEscape(host), name+".json"), nil
}

// Get reads the value of key.
func (s *FileStore) Get(_ context.Context, key string) ([]byte, bool, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, false, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("last-applied store: %w", err)
	}
	return b, true, nil
}

// Put writes val under key atomically, creating the directories (0700).
func (s *FileStore) Put(_ context.Context, key string, val []byte) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("last-applied store: %w", err)
	}
	if err := writeAtomic(p, val, 0o600, -1, -1); err != nil {
		return fmt.Errorf("last-applied store: %w", err)
	}
	return nil
}

// Delete removes key.
func (s *FileStore) Delete(_ context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("last-applied store: %w", err)
	}
	return nil
}

package facts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"gopkg.in/yaml.v3"

	"github.com/manifold-run/manifold/internal/hiera"
)

const (
	// MaxFileSize bounds one custom facts file: 1 MiB.
	MaxFileSize = 1 << 20
	// MaxFiles bounds the facts files read from facts.d: 256.
	MaxFiles = 256
)

// DirOpts are the options of FromDirOpts.
type DirOpts struct {
	// Optional is set for a directory the user did not name (the
	// default): one that cannot be read for lack of permission (a
	// directory of root's, 0700, read by another user) is skipped with a
	// warning instead of failing.
	Optional bool
	// Warn receives what was skipped: a facts file that is not a regular
	// file (a FIFO, a device, a socket: opening one could block forever),
	// and with Optional, what could not be read for lack of permission.
	// Nil ignores them.
	Warn func(error)
}

// FromDir reads the custom facts of dir (FromDirOpts with no options).
func FromDir(dir string) (map[string]any, error) { return FromDirOpts(dir, DirOpts{}) }

// FromDirOpts reads the custom facts of dir: facts.json, then facts.yaml,
// then facts.d/*.json and facts.d/*.yaml in name order, each merged deep
// over the previous (later wins; lists concatenate, as CCM). Missing files
// and a missing dir are empty; other names in facts.d and subdirectories
// are ignored. A name that is not a regular file (a FIFO, a device) is
// skipped with a warning, never opened for reading: files are opened
// non-blocking and read at most MaxFileSize+1 bytes. A file over
// MaxFileSize, a symlink (refused, as CCM does), a file that does not hold
// a map and more than MaxFiles files in facts.d are errors naming the
// file.
func FromDirOpts(dir string, o DirOpts) (map[string]any, error) {
	warn := func(err error) {
		if o.Warn != nil {
			o.Warn(err)
		}
	}
	// skip reports whether err is one to warn about and go on.
	skip := func(err error) bool {
		if o.Optional && errors.Is(err, fs.ErrPermission) {
			warn(fmt.Errorf("%w (not the --facts-dir of the command line: skipped)", err))
			return true
		}
		return false
	}
	files := []string{filepath.Join(dir, "facts.json"), filepath.Join(dir, "facts.yaml")}
	// A directory that cannot be searched is one warning, not one per file.
	if _, err := os.Lstat(files[0]); err != nil && !errors.Is(err, fs.ErrNotExist) {
		if err = fmt.Errorf("facts: %w", err); skip(err) {
			return map[string]any{}, nil
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "facts.d"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("facts: %w", err)
		if !skip(err) {
			return nil, err
		}
	}
	var extra []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.IsDir() || (ext != ".json" && ext != ".yaml") {
			continue
		}
		extra = append(extra, filepath.Join(dir, "facts.d", e.Name()))
	}
	if len(extra) > MaxFiles {
		return nil, fmt.Errorf("%w: %s holds %d facts files, over the limit of %d", ErrTooManyFiles, filepath.Join(dir, "facts.d"), len(extra), MaxFiles)
	}
	sort.Strings(extra)
	out := map[string]any{}
	for _, f := range append(files, extra...) {
		m, err := readFile(f)
		if errors.Is(err, ErrNotRegular) {
			warn(err)
			continue
		}
		if err != nil {
			if skip(err) {
				continue
			}
			return nil, err
		}
		out = hiera.Merge(out, m)
	}
	return out, nil
}

// readFile reads one facts file; a missing file is empty. It never blocks
// on a name that is not a regular file: such a name is ErrNotRegular,
// checked before opening and again on the opened file (opened
// non-blocking, not following a symlink), so a FIFO swapped in between is
// caught too.
func readFile(path string) (map[string]any, error) {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("facts: %w", err)
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%w: %s is a symlink; facts files must be regular files", ErrFactsFile, path)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is a %s; skipped", ErrNotRegular, path, fileKind(st.Mode()))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symlink; facts files must be regular files", ErrFactsFile, path)
		}
		return nil, fmt.Errorf("facts: %w", err)
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("facts: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is a %s; skipped", ErrNotRegular, path, fileKind(st.Mode()))
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("facts: %s: %w", path, err)
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%w: %s is over the limit of %d bytes", ErrFactsFile, path, MaxFileSize)
	}
	var v any
	if strings.EqualFold(filepath.Ext(path), ".json") {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err = d.Decode(&v); err == nil && d.More() {
			err = errors.New("trailing data after the JSON value")
		}
		v = numbers(v)
	} else {
		err = yaml.Unmarshal(b, &v)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFactsFile, path, err)
	}
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s holds a %T, not a map of facts", ErrFactsFile, path, v)
	}
	return normalize(m).(map[string]any), nil
}

// fileKind names the type of a file that is not regular.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsDir():
		return "directory"
	}
	return "file that is not a regular file"
}

// normalize turns YAML's int into int64 so every source agrees.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalize(e)
		}
	case []any:
		for i, e := range v {
			v[i] = normalize(e)
		}
	case int:
		return int64(v)
	}
	return v
}

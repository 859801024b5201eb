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

	"gopkg.in/yaml.v3"

	"github.com/manifold-run/manifold/internal/hiera"
)

const (
	// MaxFileSize bounds one custom facts file: 1 MiB.
	MaxFileSize = 1 << 20
	// MaxFiles bounds the facts files read from facts.d: 256.
	MaxFiles = 256
)

// FromDir reads the custom facts of dir: facts.json, then facts.yaml, then
// facts.d/*.json and facts.d/*.yaml in name order, each merged deep over
// the previous (later wins; lists concatenate, as CCM). Missing files and
// a missing dir are empty; other names in facts.d and subdirectories are
// ignored. A file over MaxFileSize, a symlink (refused, as CCM does), a
// file that does not hold a map and more than MaxFiles files in facts.d are
// errors naming the file.
func FromDir(dir string) (map[string]any, error) {
	files := []string{filepath.Join(dir, "facts.json"), filepath.Join(dir, "facts.yaml")}
	entries, err := os.ReadDir(filepath.Join(dir, "facts.d"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("facts: %w", err)
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
		if err != nil {
			return nil, err
		}
		out = hiera.Merge(out, m)
	}
	return out, nil
}

// readFile reads one facts file; a missing file is empty.
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
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("facts: %w", err)
	}
	defer f.Close()
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

package facts

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func TestGatherRealHost(t *testing.T) {
	t.Parallel()
	f, err := Gather(t.Context(), Opts{})
	require.NoError(t, err)
	for _, key := range []string{"host.info.os", "host.info.platform", "host.info.platformFamily", "host.info.hostname", "host.info.virtualizationSystem", "host.info.kernelVersion"} {
		v, ok := Query(f, key)
		require.True(t, ok, key)
		require.IsType(t, "", v, key)
	}
	os, _ := Query(f, "host.info.os")
	require.Equal(t, "linux", os)
	hn, _ := os2hostname()
	got, _ := Query(f, "host.info.hostname")
	require.Equal(t, hn, got)

	for _, key := range []string{"network.interfaces", "network.addresses", "cpu.info", "partition.partitions", "partition.usage", "memory.swap.devices"} {
		v, ok := Query(f, key)
		require.True(t, ok, key)
		require.IsType(t, []any{}, v, key)
	}
	ifaces, _ := Query(f, "network.interfaces")
	require.NotEmpty(t, ifaces, "a host has at least a loopback interface")
	name, ok := Query(f, "network.interfaces.0.name")
	require.True(t, ok)
	require.IsType(t, "", name)
	for _, key := range []string{"network.default_ipv4", "network.default_ipv6"} {
		v, ok := Query(f, key)
		require.True(t, ok, key)
		require.IsType(t, "", v, key)
	}
	total, ok := Query(f, "memory.virtual.total")
	require.True(t, ok)
	require.IsType(t, uint64(0), uintOrInt(total))
	require.Positive(t, uintOrInt(total))
	cores, ok := Query(f, "cpu.info.0.cores")
	require.True(t, ok)
	require.IsType(t, int64(0), cores)
	_, ok = Query(f, "memory.swap.info")
	require.True(t, ok)
}

func os2hostname() (string, error) { return os.Hostname() }

// uintOrInt folds the two integer types numbers() produces.
func uintOrInt(v any) uint64 {
	switch v := v.(type) {
	case int64:
		return uint64(v)
	case uint64:
		return v
	}
	return 0
}

func TestGatherCustomFacts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "facts.json"), `{"role": "web", "tags": ["a"], "dc": {"name": "ams", "rack": 4}, "big": 10000000000}`)
	write(t, filepath.Join(dir, "facts.yaml"), "role: db\ntags: [b]\ndc: {row: 2}\n")
	write(t, filepath.Join(dir, "facts.d", "20-late.yaml"), "role: cache\n")
	write(t, filepath.Join(dir, "facts.d", "10-early.json"), `{"role": "queue", "dc": {"rack": 5}, "ratio": 0.5}`)
	write(t, filepath.Join(dir, "facts.d", "README.md"), "ignored")
	write(t, filepath.Join(dir, "facts.d", "sub", "x.yaml"), "ignored: true")
	f, err := Gather(context.Background(), Opts{Dir: dir, NoSystem: true, Overrides: []string{"dc.name=fra", "env=prod", "port=8080"}})
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"role":  "cache",
		"tags":  []any{"a", "b"},
		"dc":    map[string]any{"name": "fra", "rack": int64(5), "row": int64(2)},
		"big":   int64(10000000000),
		"ratio": 0.5,
		"env":   "prod",
		"port":  int64(8080),
	}, f)
}

func TestGatherOverridesWinOverSystem(t *testing.T) {
	t.Parallel()
	f, err := Gather(t.Context(), Opts{Overrides: []string{"host.info.platformFamily=rhel"}})
	require.NoError(t, err)
	v, _ := Query(f, "host.info.platformFamily")
	require.Equal(t, "rhel", v)
	_, ok := Query(f, "host.info.hostname")
	require.True(t, ok, "an override merges into the system facts")
}

func TestGatherMissingDirIsEmpty(t *testing.T) {
	t.Parallel()
	f, err := Gather(t.Context(), Opts{Dir: filepath.Join(t.TempDir(), "nope"), NoSystem: true})
	require.NoError(t, err)
	require.Empty(t, f)
}

func TestFromDirErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) string
		is    error
		msg   string
	}{
		{"file over the limit", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "facts.yaml")
			write(t, p, "a: "+strings.Repeat("x", MaxFileSize))
			return p
		}, ErrFactsFile, "is over the limit of 1048576 bytes"},
		{"symlink", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "real.json"), `{}`)
			p := filepath.Join(dir, "facts.d", "x.json")
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.Symlink(filepath.Join(dir, "real.json"), p))
			return p
		}, ErrFactsFile, "is a symlink"},
		{"bad json", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "facts.json")
			write(t, p, `{"a": `)
			return p
		}, ErrFactsFile, "unexpected EOF"},
		{"json trailing data", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "facts.json")
			write(t, p, `{"a": 1} {"b": 2}`)
			return p
		}, ErrFactsFile, "trailing data"},
		{"bad yaml", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "facts.d", "x.yaml")
			write(t, p, "a: [")
			return p
		}, ErrFactsFile, "yaml"},
		{"not a map", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "facts.yaml")
			write(t, p, "- a\n- b\n")
			return p
		}, ErrFactsFile, "holds a []interface {}, not a map of facts"},
		{"too many files", func(t *testing.T, dir string) string {
			for i := range MaxFiles + 1 {
				write(t, filepath.Join(dir, "facts.d", fmt.Sprintf("%03d.yaml", i)), "a: 1\n")
			}
			return filepath.Join(dir, "facts.d")
		}, ErrTooManyFiles, "holds 257 facts files, over the limit of 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := tt.setup(t, dir)
			_, err := Gather(t.Context(), Opts{Dir: dir, NoSystem: true})
			require.Error(t, err)
			require.True(t, errors.Is(err, tt.is), "%v", err)
			require.ErrorContains(t, err, path)
			require.ErrorContains(t, err, tt.msg)
		})
	}
}

func TestFromDirAtLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A YAML file of exactly MaxFileSize bytes.
	body := "a: " + strings.Repeat("x", MaxFileSize-4) + "\n"
	require.Len(t, body, MaxFileSize)
	write(t, filepath.Join(dir, "facts.yaml"), body)
	for i := range MaxFiles {
		write(t, filepath.Join(dir, "facts.d", fmt.Sprintf("%03d.json", i)), fmt.Sprintf(`{"n": %d}`, i))
	}
	f, err := FromDir(dir)
	require.NoError(t, err)
	require.Equal(t, int64(MaxFiles-1), f["n"], "the last file in name order wins")
	require.Len(t, f["a"], MaxFileSize-4)
}

func TestGatherBadOverride(t *testing.T) {
	t.Parallel()
	_, err := Gather(t.Context(), Opts{NoSystem: true, Overrides: []string{"novalue"}})
	require.ErrorContains(t, err, `facts: hiera: malformed assignment "novalue"`)
}

func TestQuery(t *testing.T) {
	t.Parallel()
	f := map[string]any{"host": map[string]any{"info": map[string]any{"os": "linux"}}, "l": []any{map[string]any{"n": "a"}}}
	tests := []struct {
		path string
		want any
		ok   bool
	}{
		{"host.info.os", "linux", true},
		{"host.info", map[string]any{"os": "linux"}, true},
		{"l.0.n", "a", true},
		{"", f, true},
		{"host.info.nope", nil, false},
		{"l.1.n", nil, false},
		{"l.x", nil, false},
		{"host.info.os.deeper", nil, false},
	}
	for _, tt := range tests {
		got, ok := Query(f, tt.path)
		require.Equal(t, tt.ok, ok, tt.path)
		require.Equal(t, tt.want, got, tt.path)
	}
}

package schemas

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTypesAndFiles(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"apply", "archive", "document", "exec", "file", "group", "http", "package", "scaffold", "service", "user"}, Types())
	files := Files()
	for _, name := range []string{"common.cue", "manifest.cue", "file.cue", "exec.cue", "apply.cue", "document.cue"} {
		require.Contains(t, files[name], "package schemas", name)
	}
	require.Contains(t, files["file.cue"], "#File:")
}

func TestEveryTypeIsClosed(t *testing.T) {
	t.Parallel()
	for _, typ := range Types() {
		src := "resources: [{type: " + typ + ", name: x, no_such_property: 1}]\n"
		_, err := Parse("m.yaml", []byte(src))
		col := strings.Index(src, "no_such_property") + 1
		// Types with required properties (document's content) report those too.
		require.ErrorContains(t, err, fmt.Sprintf("m.yaml:1:%d: resources[0].no_such_property: field not allowed", col), typ)
	}
}

func TestMaxManifestBytes(t *testing.T) {
	t.Parallel()
	require.Equal(t, 16<<20, MaxManifestBytes)

	big := bytes.Repeat([]byte("#"), MaxManifestBytes+1)
	_, err := Parse("big.yaml", big)
	require.ErrorIs(t, err, ErrManifestTooLarge)
	require.EqualError(t, err, "big.yaml: schemas: manifest too large: larger than the limit of 16777216 bytes (16 MiB)")

	path := filepath.Join(t.TempDir(), "big.yaml")
	require.NoError(t, os.WriteFile(path, big, 0o600))
	_, err = Load(path)
	require.ErrorIs(t, err, ErrManifestTooLarge)

	// Exactly at the limit is accepted (a manifest of no resources and a
	// long comment).
	limit := append([]byte("resources: []\n"), big[:MaxManifestBytes-len("resources: []\n")]...)
	_, err = Parse("limit.yaml", limit)
	require.NoError(t, err)
}

func TestMaxResources(t *testing.T) {
	t.Parallel()
	require.Equal(t, 50000, MaxResources)

	_, err := Parse("many.yaml", flatManifest(MaxResources+1))
	require.ErrorIs(t, err, ErrTooManyResources)
	require.EqualError(t, err, "many.yaml:1:1: resources: 50001 resources exceed the limit of 50000 per manifest; split it with apply resources")

	// Block-shape resources count too; defaults entries do not.
	var b strings.Builder
	b.WriteString("resources:\n  - file:\n      - defaults: {owner: app}\n")
	for range MaxResources + 1 {
		b.WriteString("      - /x: {}\n")
	}
	_, err = Parse("many.yaml", []byte(b.String()))
	require.ErrorIs(t, err, ErrTooManyResources)
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load("testdata/does-not-exist.yaml")
	require.ErrorIs(t, err, os.ErrNotExist)
	var errs Errors
	require.False(t, errors.As(err, &errs))
}

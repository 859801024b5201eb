package cli

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/internal/bundle"
)

// testBundle holds files of the given sizes.
func testBundle(t testing.TB, sizes ...int) *bundle.Bundle {
	b := bundle.New()
	for i, n := range sizes {
		require.NoError(t, b.Add(strings.Repeat("d/", i)+"f.txt", bytes.Repeat([]byte{byte('a' + i)}, n)))
	}
	return b
}

func gunzip(t *testing.T, archive []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	require.NoError(t, err)
	out, err := io.ReadAll(zr) // checks the CRC and the size
	require.NoError(t, err)
	return out
}

// TestArchiveBundleLocalIsTheSameTar: the embedded engine's bundle is a
// gzip member of stored blocks holding the very tar bundle.Archive
// compresses, so bundle.Open reads it as it reads any bundle: at 0, 1
// and many files, across stored blocks (65,535 bytes each) and at their
// edge.
func TestArchiveBundleLocalIsTheSameTar(t *testing.T) {
	for _, sizes := range [][]int{nil, {0}, {11}, {3, 70000}, {maxStoredBlock - 1536}, {200000, 1, 65535}} {
		b := testBundle(t, sizes...)
		local, err := archiveBundle(b, true)
		require.NoError(t, err)
		compressed, err := archiveBundle(b, false)
		require.NoError(t, err)
		want, err := b.Archive()
		require.NoError(t, err)
		require.Equal(t, want, compressed, "not local: bundle.Archive's bytes")
		require.Equal(t, gunzip(t, want), gunzip(t, local), "sizes %v: the same tar", sizes)
		opened, err := bundle.Open(local)
		require.NoError(t, err, "sizes %v", sizes)
		require.Equal(t, b.Names(), opened.Names())
		for _, name := range b.Names() {
			w, _ := b.Read(name)
			g, err := opened.Read(name)
			require.NoError(t, err)
			require.Equal(t, w, g, name)
		}
		again, err := archiveBundle(b, true)
		require.NoError(t, err)
		require.Equal(t, local, again, "the same files give the same bytes (the digest names the content)")
	}
}

// TestStoredGzipBlocks: a stored block holds at most 65,535 bytes; the
// last one is marked final; an empty input is one empty final block.
func TestStoredGzipBlocks(t *testing.T) {
	for _, n := range []int{0, 1, maxStoredBlock, maxStoredBlock + 1, 3*maxStoredBlock + 7} {
		data := bytes.Repeat([]byte{7}, n)
		gz := storedGzip(data)
		blocks := max(1, (n+maxStoredBlock-1)/maxStoredBlock)
		require.Len(t, gz, 10+n+5*blocks+8, "n=%d", n)
		require.Equal(t, data, gunzip(t, gz), "n=%d", n)
		require.Equal(t, byte(1), gz[10+(blocks-1)*(5+maxStoredBlock)], "n=%d: the last block is final", n)
		if blocks > 1 {
			require.Equal(t, byte(0), gz[10], "n=%d: the first block is not final", n)
		}
	}
}

// BenchmarkArchiveBundle: packing a 1-file bundle, compressed (a run sent
// to a server) and local (the embedded engine's).
func BenchmarkArchiveBundle(b *testing.B) {
	bun := testBundle(b, 400)
	for _, local := range []bool{false, true} {
		name := "compressed"
		if local {
			name = "local"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := archiveBundle(bun, local); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package cli

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/bundle"
	"github.com/manifold-run/manifold/internal/compile"
)

// maxInlineData is the largest run data (JSON) the run request carries
// itself; larger data travels in the bundle (RunRequest.DataFile), so data
// files up to MaxDataFileBytes never meet the server's maximum payload
// (1 MiB by default).
const maxInlineData = 64 << 10

// runDataFile is where the bundle holds run data too large for the
// request.
const runDataFile = ".manifold/run-data.json"

// uploadBundle stores the bundle of a compiled manifest tree (the entry
// manifest, its child manifests and the files they reference) in the
// object store and fills req's Bundle, Entry and ManifestName. Run data
// over maxInlineData goes into the bundle (req.DataFile). With local
// set, WorkDir is the bundle root on this host (embedded mode: workers
// share the filesystem).
func uploadBundle(ctx context.Context, b *bus.Bus, req *bus.RunRequest, path string, t *compile.Tree, local bool) error {
	archive, err := packBundle(req, path, t, local)
	if err != nil {
		return err
	}
	return putBundle(ctx, b, req, archive)
}

// packBundle is uploadBundle's part that needs no bus: it returns the
// bundle's archive and fills every field of req but Bundle (putBundle
// does). The embedded apply packs while its engine starts.
func packBundle(req *bus.RunRequest, path string, t *compile.Tree, local bool) ([]byte, error) {
	if len(req.Data) > 0 {
		data, err := json.Marshal(req.Data)
		if err != nil {
			return nil, fmt.Errorf("run data: %w", err)
		}
		if len(data) > maxInlineData {
			if _, err := t.Bundle.Read(runDataFile); err == nil {
				return nil, fmt.Errorf("bundle %s: %s is reserved for the run's data", path, runDataFile)
			}
			if err := t.Bundle.Add(runDataFile, data); err != nil {
				return nil, fmt.Errorf("bundle %s: run data: %w", path, err)
			}
			req.Data, req.DataFile = nil, runDataFile
		}
	}
	archive, err := archiveBundle(t.Bundle, local)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", path, err)
	}
	req.Entry, req.ManifestName = t.Entry, path
	if local {
		if req.WorkDir, err = filepath.Abs(filepath.Dir(path)); err != nil {
			return nil, err
		}
	}
	return archive, nil
}

// putBundle stores a packed bundle and names it in req.Bundle.
func putBundle(ctx context.Context, b *bus.Bus, req *bus.RunRequest, archive []byte) error {
	name, err := b.PutBundle(ctx, archive)
	if err != nil {
		return err
	}
	req.Bundle = name
	return nil
}

// archiveBundle returns b as a tar.gz (bundle.Archive's format, which
// every coordinator and worker opens). A local bundle (the embedded
// engine's: it goes to an object store in this process's memory) is not
// compressed: its gzip member holds stored deflate blocks, the same tar
// inside. gzip's compressor cost more than the rest of a 1-file apply's
// bundle: flate.NewWriter allocates 2.2 MB of tables, 30 % of the bytes
// such a process allocates, each page of them a page fault.
func archiveBundle(b *bundle.Bundle, local bool) ([]byte, error) {
	if !local {
		return b.Archive()
	}
	var t bytes.Buffer
	tw := tar.NewWriter(&t)
	for _, name := range b.Names() {
		data, err := b.Read(name)
		if err != nil {
			return nil, err
		}
		// The headers bundle.Archive writes.
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return storedGzip(t.Bytes()), nil
}

// maxStoredBlock is the most a stored deflate block holds (RFC 1951,
// 3.2.4: LEN is 16 bits).
const maxStoredBlock = 65535

// storedGzip returns data as one gzip member (RFC 1952) whose deflate
// stream is stored blocks: no compression, nothing allocated but the
// result. The header is compress/gzip's with no name, time or level:
// 1f 8b, deflate, no flags, mtime 0, XFL 0, OS 255 (unknown).
func storedGzip(data []byte) []byte {
	blocks := max(1, (len(data)+maxStoredBlock-1)/maxStoredBlock)
	out := make([]byte, 0, 10+len(data)+5*blocks+8)
	out = append(out, 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255)
	rest := data
	for i := range blocks {
		n := min(len(rest), maxStoredBlock)
		final := byte(0)
		if i == blocks-1 {
			final = 1 // BFINAL; BTYPE 00 (stored)
		}
		out = append(out, final)
		out = binary.LittleEndian.AppendUint16(out, uint16(n))
		out = binary.LittleEndian.AppendUint16(out, ^uint16(n))
		out = append(out, rest[:n]...)
		rest = rest[n:]
	}
	out = binary.LittleEndian.AppendUint32(out, crc32.ChecksumIEEE(data))
	return binary.LittleEndian.AppendUint32(out, uint32(len(data)))
}

// Package bundle builds, reads and resolves paths in manifest bundles: a
// manifest plus the files it references (child manifests of apply
// resources, file sources), as a deterministic tar.gz whose paths are
// relative to the bundle root, the entry manifest's directory.
package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"
)

// Limits of a bundle.
const (
	// MaxBytes caps the uncompressed size of all files of a bundle.
	MaxBytes = 64 << 20
	// MaxFiles caps the number of files of a bundle.
	MaxFiles = 10000
)

// Errors of this package; match with errors.Is.
var (
	// ErrEscapes: a path leaves the bundle root (../, or a symlink
	// pointing outside).
	ErrEscapes = errors.New("path escapes the bundle")
	// ErrTooLarge: the bundle exceeds MaxBytes or MaxFiles.
	ErrTooLarge = errors.New("bundle too large")
	// ErrNotInBundle: the bundle has no such file.
	ErrNotInBundle = errors.New("file not in the bundle")
)

// Bundle is a set of files by slash-separated path relative to the root.
type Bundle struct {
	files map[string][]byte
	size  int64
	// maxFiles and maxBytes are MaxFiles and MaxBytes (smaller in tests).
	maxFiles int
	maxBytes int64
}

// New returns an empty bundle.
func New() *Bundle { return newLimited(MaxFiles, MaxBytes) }

func newLimited(maxFiles int, maxBytes int64) *Bundle {
	return &Bundle{files: map[string][]byte{}, maxFiles: maxFiles, maxBytes: maxBytes}
}

// Add puts a file in the bundle. name must be a clean relative path inside
// the root.
func (b *Bundle) Add(name string, content []byte) error {
	clean, err := Clean(name)
	if err != nil {
		return err
	}
	if old, ok := b.files[clean]; ok {
		b.size -= int64(len(old))
	}
	if _, ok := b.files[clean]; !ok && len(b.files) >= b.maxFiles {
		return fmt.Errorf("%w: more than %d files", ErrTooLarge, b.maxFiles)
	}
	if b.size+int64(len(content)) > b.maxBytes {
		return fmt.Errorf("%w: more than %d bytes (%d MiB) of files", ErrTooLarge, b.maxBytes, b.maxBytes>>20)
	}
	b.files[clean] = content
	b.size += int64(len(content))
	return nil
}

// Read returns a file of the bundle.
func (b *Bundle) Read(name string) ([]byte, error) {
	clean, err := Clean(name)
	if err != nil {
		return nil, err
	}
	data, ok := b.files[clean]
	if !ok {
		return nil, fmt.Errorf("%s: %w", clean, ErrNotInBundle)
	}
	return data, nil
}

// Names returns the bundle's file names, sorted.
func (b *Bundle) Names() []string {
	names := make([]string, 0, len(b.files))
	for n := range b.files {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Clean checks and cleans a bundle path: relative, slash-separated, not
// leaving the root.
func Clean(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("empty path: %w", ErrNotInBundle)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%q: bundle paths are relative to the root", name)
	}
	clean := path.Clean(name)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%q: %w", name, ErrEscapes)
	}
	return clean, nil
}

// Resolve resolves ref, written in the manifest at bundle path from, to a
// bundle path: a relative ref is relative to from's directory, an absolute
// one to the bundle root. A result outside the root is ErrEscapes.
func Resolve(from, ref string) (string, error) {
	if ref == "" {
		return "", errors.New("empty path")
	}
	var joined string
	if strings.HasPrefix(ref, "/") {
		joined = path.Clean(strings.TrimPrefix(ref, "/"))
	} else {
		joined = path.Join(path.Dir(from), ref)
	}
	if joined == ".." || strings.HasPrefix(joined, "../") {
		return "", fmt.Errorf("%q (from %s): %w", ref, from, ErrEscapes)
	}
	return joined, nil
}

// Archive returns the bundle as a tar.gz. The same files always give the
// same bytes (sorted names, fixed times and modes), so the digest names
// the content.
func (b *Bundle) Archive() ([]byte, error) {
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	for _, name := range b.Names() {
		data := b.files[name]
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
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Open reads a tar.gz bundle. Only regular files are taken; a path that
// escapes the root, a link, or a bundle over the limits is an error.
func Open(archive []byte) (*Bundle, error) { return open(archive, New()) }

// open reads archive into the empty bundle b, within b's limits.
func open(archive []byte, b *Bundle) (*Bundle, error) {
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("bundle: not a tar.gz: %w", err)
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		case tar.TypeSymlink, tar.TypeLink:
			return nil, fmt.Errorf("bundle: %s is a link: %w", hdr.Name, ErrEscapes)
		default:
			continue
		}
		if hdr.Size > b.maxBytes {
			return nil, fmt.Errorf("bundle: %s: %w: %d bytes, over the limit of %d", hdr.Name, ErrTooLarge, hdr.Size, b.maxBytes)
		}
		data, err := io.ReadAll(io.LimitReader(tr, b.maxBytes+1))
		if err != nil {
			return nil, fmt.Errorf("bundle: %s: %w", hdr.Name, err)
		}
		if err := b.Add(strings.TrimPrefix(hdr.Name, "./"), data); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
	}
}

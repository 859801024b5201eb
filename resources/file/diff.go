package file

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/manifold-run/manifold/resources/safefs"
)

const (
	// MaxDiffBytes bounds the diff a file resource puts in its outcome;
	// a longer diff is cut at a line boundary and ends with a line
	// "[manifold: diff truncated: N more bytes]".
	MaxDiffBytes = 64 << 10
	// MaxContentBytes bounds the content read from a source file (64 MiB).
	MaxContentBytes = 64 << 20
	// maxDiffBytes and maxDiffLines bound the line diff; larger or binary
	// content is summarised by size and hash.
	maxDiffBytes = 256 << 10
	maxDiffLines = 1000
	// diffContext is the number of unchanged lines around each change.
	diffContext = 3
)

// contentDiff describes how content changes from old to new: a unified-style
// line diff for text, sizes and hashes otherwise.
func contentDiff(path string, old, new []byte) string {
	if !isText(old) || !isText(new) {
		return summary(old, new)
	}
	a, b := lines(old), lines(new)
	if len(a) > maxDiffLines || len(b) > maxDiffLines {
		return summary(old, new)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s (desired)\n", path, path)
	ops := diffLines(a, b)
	// Print changes with diffContext lines around them; "@@" separates
	// hunks.
	keep := make([]bool, len(ops))
	for i, op := range ops {
		if op.kind != ' ' {
			for j := max(0, i-diffContext); j <= min(len(ops)-1, i+diffContext); j++ {
				keep[j] = true
			}
		}
	}
	gap := true
	for i, op := range ops {
		if !keep[i] {
			gap = true
			continue
		}
		if gap {
			out.WriteString("@@\n")
			gap = false
		}
		out.WriteByte(op.kind)
		out.WriteString(op.line)
		if !strings.HasSuffix(op.line, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
	return truncateDiff(out.String())
}

// truncateDiff cuts d to at most MaxDiffBytes, at a line boundary, and marks
// the cut.
func truncateDiff(d string) string {
	if len(d) <= MaxDiffBytes {
		return d
	}
	marker := "[manifold: diff truncated: %d more bytes]\n"
	keep := d[:MaxDiffBytes-len(marker)-20]
	if i := strings.LastIndexByte(keep, '\n'); i >= 0 {
		keep = keep[:i+1]
	}
	return keep + fmt.Sprintf(marker, len(d)-len(keep))
}

// diff describes a content change of the file at path (the managed path,
// or the link's target with links: follow) for the outcome, unless policy
// hides it: sensitive content is reported by size only; content an
// unprivileged user of the host could not read, before (when the file
// exists, a regular file of mode oldMode) or after (newMode, in path's
// directory), is hidden unless show_diff is true (as
// safefs.ReadableByOthers says: the file world-readable and every
// directory above it world-searchable); show_diff false hides every diff.
// The directory's verdict is remembered by the safefs.Reach of ctx, if any.
func (f *File) diff(ctx context.Context, path string, exists bool, oldMode fs.FileMode, old, new []byte, newMode fs.FileMode) string {
	return f.diffIn(path, exists, oldMode, old, new, newMode, safefs.ReachableByOthersContext(ctx, filepath.Dir(path)))
}

// diffIn is diff with the reachability of path's directory given
// (reachable: every directory above it world-searchable).
func (f *File) diffIn(path string, exists bool, oldMode fs.FileMode, old, new []byte, newMode fs.FileMode, reachable bool) string {
	switch {
	case f.Sensitive:
		return fmt.Sprintf("content redacted (sensitive): %d → %d bytes", len(old), len(new))
	case f.ShowDiff != nil && !*f.ShowDiff:
		return fmt.Sprintf("diff hidden (show_diff: false): %d → %d bytes", len(old), len(new))
	case f.ShowDiff == nil && !diffable(exists, oldMode, newMode, reachable):
		return fmt.Sprintf("diff hidden: %s is not readable by other users (set show_diff: true to show it): %d → %d bytes", f.Path, len(old), len(new))
	}
	return contentDiff(f.Path, old, new)
}

// diffable tells whether an unprivileged user could read a file now (when
// it exists: a regular file, not a link, of mode oldMode) and once
// written with newMode, its directory being reachable or not: what
// safefs.ReadableByOthers says of the existing file, without resolving
// its path again.
func diffable(exists bool, oldMode, newMode fs.FileMode, reachable bool) bool {
	if newMode&0o004 == 0 || !reachable {
		return false
	}
	return !exists || oldMode&0o004 != 0
}

func isText(b []byte) bool {
	return len(b) <= maxDiffBytes && utf8.Valid(b) && bytes.IndexByte(b, 0) < 0
}

func summary(old, new []byte) string {
	return fmt.Sprintf("size %d → %d bytes, sha256 %.12x → %.12x", len(old), len(new), sha256.Sum256(old), sha256.Sum256(new))
}

// lines splits b into lines that keep their "\n".
func lines(b []byte) []string {
	var out []string
	for s := string(b); s != ""; {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

type diffOp struct {
	kind byte // ' ', '-', '+'
	line string
}

// diffLines is a longest-common-subsequence line diff.
func diffLines(a, b []string) []diffOp {
	n, m := len(a), len(b)
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	ops := make([]diffOp, 0, n+m)
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i]})
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			ops = append(ops, diffOp{'-', a[i]})
			i++
		default:
			ops = append(ops, diffOp{'+', b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		ops = append(ops, diffOp{'-', a[i]})
	}
	for ; j < m; j++ {
		ops = append(ops, diffOp{'+', b[j]})
	}
	return ops
}

package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// indentJSON appends src, a compact JSON document (no whitespace outside
// strings, as coordinator.MarshalReport writes it), to dst indented as
// json.Indent(dst, src, "", "  ") would, byte for byte
// (TestIndentJSONIsJSONIndent). It trusts src: it checks nothing but the
// absence of whitespace, and hands a document with any (or an unbalanced
// one) to json.Indent, which validates. json.Indent runs its validating
// scanner on every byte: 40 ms of a converged 20,000-file apply's report
// (its 5.3 MB), against some 5 ms here.
func indentJSON(dst *bytes.Buffer, src []byte) error {
	start := dst.Len()
	dst.Grow(len(src) + len(src)/3)
	if !indentCompact(dst, src) {
		dst.Truncate(start)
		return json.Indent(dst, src, "", "  ")
	}
	return nil
}

// writeEncodedReport writes src, a report's encoding
// (coordinator.MarshalReport, in this process or handed over by the
// embedded coordinator), indented as indentJSON does, and a newline, to w
// through a buffer of indentChunk bytes: a 20,000-resource report (7.7 MB
// indented) is never whole in memory twice, and its first bytes reach a
// reader while the rest is indented. Such an encoding is compact by
// construction (TestMarshalReportIndentsOnTheFastPath), so the fast path
// takes it whole without a first pass to make sure (that pass was 7 ms
// of a 20,000-resource report's 16); should it give a document up all
// the same, what it wrote stays written and errNotCompact says so.
func writeEncodedReport(w io.Writer, src []byte) error {
	widenPipe(w, len(src)+len(src)/2)
	bw := bufio.NewWriterSize(w, indentChunk)
	if !indentCompact(bw, src) {
		_ = bw.Flush()
		return errNotCompact
	}
	_ = bw.WriteByte('\n')
	return bw.Flush()
}

// errNotCompact: a report's encoding the fast path could not indent.
var errNotCompact = errors.New("report: its encoding is not compact JSON; the output above is cut short")

// indentChunk is the most writeEncodedReport holds before writing.
const indentChunk = 256 << 10

// jsonSink is where indentCompact writes: a bytes.Buffer, a
// bufio.Writer (or, in tests, one that keeps nothing).
type jsonSink interface {
	Write([]byte) (int, error)
	WriteByte(byte) error
	WriteString(string) (int, error)
}

// indentCompact is indentJSON's fast path; false when src is not compact
// JSON it can indent (what it wrote to dst is then to be dropped).
func indentCompact(dst jsonSink, src []byte) bool {
	depth := 0
	// nl holds a newline and the indentation of depth levels.
	nl := []byte("\n                                ")
	newline := func() {
		for len(nl) < 1+2*depth {
			nl = append(nl, "  "...)
		}
		dst.Write(nl[:1+2*depth])
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '"':
			// A string, copied whole: up to the first quote not escaped
			// by an odd run of backslashes.
			j := i + 1
			for {
				k := bytes.IndexByte(src[j:], '"')
				if k < 0 {
					return false
				}
				j += k
				b := j - 1
				for b > i && src[b] == '\\' {
					b--
				}
				if (j-1-b)%2 == 0 {
					break
				}
				j++
			}
			dst.Write(src[i : j+1])
			i = j
		case '{', '[':
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			if i+1 < len(src) && src[i+1] == closer {
				// json.Indent keeps an empty object or array as it is.
				dst.WriteByte(c)
				dst.WriteByte(closer)
				i++
				continue
			}
			dst.WriteByte(c)
			depth++
			newline()
		case '}', ']':
			depth--
			if depth < 0 {
				return false
			}
			newline()
			dst.WriteByte(c)
		case ',':
			dst.WriteByte(c)
			newline()
		case ':':
			dst.WriteString(": ")
		case ' ', '\t', '\n', '\r':
			return false
		default:
			// A number, true, false or null: copied up to the next
			// structural byte.
			j := i
			for j < len(src) && !isStructural(src[j]) {
				j++
			}
			dst.Write(src[i:j])
			i = j - 1
		}
	}
	return depth == 0
}

func isStructural(c byte) bool {
	switch c {
	case '{', '}', '[', ']', ',', ':', '"', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

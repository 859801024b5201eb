package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/coordinator"
)

func stdIndent(t testing.TB, src []byte) []byte {
	var b bytes.Buffer
	require.NoError(t, json.Indent(&b, src, "", "  "))
	return b.Bytes()
}

// randomValue builds a JSON value of every kind, strings with escapes,
// empty and nested containers.
func randomValue(r *rand.Rand, depth int) any {
	k := r.IntN(9)
	if depth > 4 {
		k = r.IntN(5)
	}
	strs := []string{"", "a", `q"uote`, `back\slash`, "new\nline", "tab\t", "ünï€ode", "\u2028\u2029", "<&>", "ctl\x01", "{[,:]}"}
	switch k {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return r.Float64()*1e6 - 5e5
	case 3:
		return []float64{1e21, -0.000001, 3}[r.IntN(3)]
	case 4:
		return strs[r.IntN(len(strs))]
	case 5, 6:
		n := r.IntN(4)
		m := make(map[string]any, n)
		for range n {
			m[strs[r.IntN(len(strs))]+string(rune('a'+r.IntN(26)))] = randomValue(r, depth+1)
		}
		return m
	default:
		n := r.IntN(4)
		a := make([]any, n)
		for i := range a {
			a[i] = randomValue(r, depth+1)
		}
		return a
	}
}

// The fast indenter writes what json.Indent writes, byte for byte, for
// reports and for JSON of every shape.
func TestIndentJSONIsJSONIndent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		src, err := json.Marshal(randomValue(r, 0))
		require.NoError(t, err)
		var got bytes.Buffer
		require.NoError(t, indentJSON(&got, src))
		require.Equal(t, string(stdIndent(t, src)), got.String(), "document %d: %s", i, src)
	}

	now := time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC)
	rep := &coordinator.Report{RunID: "r1", Manifest: "m.yaml", Status: coordinator.RunSucceeded, StartedAt: &now, FinishedAt: &now,
		Resources: []coordinator.ResourceReport{
			{Ref: "file#/a", Type: "file", Name: "/a", Status: "stable", Message: `said "hi"` + "\n"},
			{Ref: "exec#x", Type: "exec", Name: "x", Status: "failed", Error: "exit 1: \\ {}[]"},
		}}
	src, err := coordinator.MarshalReport(rep)
	require.NoError(t, err)
	var got bytes.Buffer
	require.NoError(t, indentJSON(&got, src))
	require.Equal(t, string(stdIndent(t, src)), got.String())
	require.True(t, strings.Contains(got.String(), "\n  \"resources\": [\n    {\n"), got.String())
}

// A document with whitespace, or unbalanced, goes to json.Indent, which
// validates it.
func TestIndentJSONHandsOtherInputToJSONIndent(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, indentJSON(&b, []byte(`{"a": [1, 2]}`)))
	require.Equal(t, "{\n  \"a\": [\n    1,\n    2\n  ]\n}", b.String())
	b.Reset()
	require.Error(t, indentJSON(&b, []byte(`{"a":[1,2]`)))
	b.Reset()
	require.Error(t, indentJSON(&b, []byte(`{"a":"unterminated}`)))
	b.Reset()
	require.Error(t, indentJSON(&b, []byte(`]`)))
}

func FuzzIndentJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[{},[],{"b":null}]}`, `"x\"y"`, `[1e-7,true,false]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		var compact bytes.Buffer
		if !json.Valid(src) || json.Compact(&compact, src) != nil || !bytes.Equal(compact.Bytes(), src) {
			return
		}
		var got bytes.Buffer
		require.NoError(t, indentJSON(&got, src))
		require.Equal(t, string(stdIndent(t, src)), got.String())
	})
}

func BenchmarkIndentReport(b *testing.B) {
	rep := &coordinator.Report{RunID: "r1", Status: coordinator.RunSucceeded}
	for i := range 20000 {
		rep.Resources = append(rep.Resources, coordinator.ResourceReport{Ref: "file#/srv/f" + string(rune('a'+i%26)), Type: "file",
			Name: "/srv/f", Status: "stable", Worker: "embedded", Pool: "default", Attempts: 1})
	}
	src, err := coordinator.MarshalReport(rep)
	require.NoError(b, err)
	b.SetBytes(int64(len(src)))
	var buf bytes.Buffer
	b.Run("indentJSON", func(b *testing.B) {
		for b.Loop() {
			buf.Reset()
			_ = indentJSON(&buf, src)
		}
	})
	b.Run("json.Indent", func(b *testing.B) {
		for b.Loop() {
			buf.Reset()
			_ = json.Indent(&buf, src, "", "  ")
		}
	})
}

// smallWrites records each write it is given.
type smallWrites struct {
	bytes.Buffer
	writes int
}

func (w *smallWrites) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// writeEncodedReport writes what indentJSON makes, and a newline, in
// chunks of at most indentChunk bytes; a document that is not compact
// JSON (whitespace, unbalanced, cut short: no encoding of a report's) is
// given up with errNotCompact.
func TestWriteEncodedReportStreamsWhatIndentJSONMakes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		src, err := json.Marshal(randomValue(r, 0))
		require.NoError(t, err)
		var got smallWrites
		require.NoError(t, writeEncodedReport(&got, src))
		require.Equal(t, string(stdIndent(t, src))+"\n", got.String(), "document %d: %s", i, src)
	}

	// A report of 20,000 resources: written in chunks, the same bytes.
	rep := &coordinator.Report{RunID: "r1", Manifest: "m.yaml", Status: coordinator.RunSucceeded}
	for i := range 20_000 {
		rep.Resources = append(rep.Resources, coordinator.ResourceReport{Ref: fmt.Sprintf("file#/f%d", i), Type: "file",
			Name: fmt.Sprintf("/f%d", i), Status: "stable", Message: `a "quoted" \ message`})
	}
	src, err := coordinator.MarshalReport(rep)
	require.NoError(t, err)
	var got smallWrites
	require.NoError(t, writeEncodedReport(&got, src))
	require.Equal(t, string(stdIndent(t, src))+"\n", got.String())
	require.Greater(t, got.writes, got.Len()/indentChunk, "written in chunks")

	for _, doc := range []string{`{"a": [1, 2]}`, `{"a":[1,2],"b":"x"} `, `{"a":[1,2]`, `]`, `{"a":[1,2]]}`} {
		var got smallWrites
		require.ErrorIs(t, writeEncodedReport(&got, []byte(doc)), errNotCompact, doc)
	}
}

// A report written to a pipe widens the pipe first (fewer waits for a
// reader to be scheduled), and reaches the reader whole.
func TestWriteEncodedReportWidensAPipe(t *testing.T) {
	rep := &coordinator.Report{RunID: "r1", Manifest: "m.yaml", Status: coordinator.RunSucceeded}
	for i := range 5_000 {
		rep.Resources = append(rep.Resources, coordinator.ResourceReport{Ref: fmt.Sprintf("file#/f%d", i), Type: "file",
			Name: fmt.Sprintf("/f%d", i), Status: "stable"})
	}
	src, err := coordinator.MarshalReport(rep)
	require.NoError(t, err)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		got <- b
	}()
	require.NoError(t, writeEncodedReport(w, src))
	size, _, errno := syscall.Syscall(syscall.SYS_FCNTL, w.Fd(), 1032 /* F_GETPIPE_SZ */, 0)
	require.Zero(t, errno)
	require.Greater(t, int(size), 64<<10, "the pipe's buffer")
	require.NoError(t, w.Close())
	require.Equal(t, string(stdIndent(t, src))+"\n", string(<-got))
}

// A report's encoding (coordinator.MarshalReport) always takes the fast
// path whole, whatever its strings hold, so writeEncodedReport may skip
// the pass that makes sure of it; what it writes is what json.Indent
// makes.
func TestMarshalReportIndentsOnTheFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	odd := []string{"", `"`, `\`, `\"`, `"\\"`, "\n\t\r", " : , { } [ ] ", "\u2028\u2029", "<&>", "é漢字", "\x00\x1f", "\xff\xfe", `\u00e9`}
	str := func() string {
		var b strings.Builder
		for range r.IntN(4) {
			b.WriteString(odd[r.IntN(len(odd))])
		}
		return b.String()
	}
	var report func(depth int) *coordinator.Report
	report = func(depth int) *coordinator.Report {
		started := time.Unix(r.Int64N(2e9), r.Int64N(1e9)).UTC()
		rep := &coordinator.Report{RunID: str(), Manifest: str(), Status: coordinator.RunStatus(str()), Noop: r.IntN(2) == 0,
			DurationMS: r.Int64N(1e6), TraceID: str(), Error: str(), PreMessage: str(), StartedAt: &started}
		for range r.IntN(6) {
			rr := coordinator.ResourceReport{Ref: str(), Type: str(), Name: str(), Alias: str(), Status: str(), Message: str(),
				Error: str(), Worker: str(), Diff: str(), Attempts: r.IntN(3), DurationMS: r.Int64N(1000)}
			if r.IntN(3) == 0 {
				rr.HealthChecks = []bus.HealthCheck{{Name: str(), Status: str(), Output: str(), Tries: r.IntN(3)}}
			}
			if depth < 2 && r.IntN(4) == 0 {
				rr.Child = report(depth + 1)
			}
			rep.Resources = append(rep.Resources, rr)
		}
		return rep
	}
	for i := range 300 {
		src, err := coordinator.MarshalReport(report(0))
		require.NoError(t, err)
		require.True(t, indentCompact(discard{}, src), "report %d is not compact: %s", i, src)
		var got bytes.Buffer
		require.NoError(t, writeEncodedReport(&got, src))
		require.Equal(t, string(stdIndent(t, src))+"\n", got.String(), "report %d", i)
	}
}

// discard is a jsonSink that keeps nothing: whether indentCompact takes a document whole.
type discard struct{}

func (discard) Write(p []byte) (int, error)       { return len(p), nil }
func (discard) WriteByte(byte) error              { return nil }
func (discard) WriteString(s string) (int, error) { return len(s), nil }

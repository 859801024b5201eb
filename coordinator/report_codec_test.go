package coordinator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/manifold-run/manifold/bus"
)

var reportStrings = []string{
	"", "file#/tmp/x", "stable", `quote " back \ slash`, "tab\tline\n", "<b> & </b>", "\x00\x1f\x7f",
	"é 日本 🚀", "\xff bad utf8", "a\u2028b", "--- a\n+++ b\n@@\n-x\n+y\n",
}

func randReportString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return ""
	}
	return reportStrings[r.IntN(len(reportStrings))]
}

func randReport(r *rand.Rand, depth int) *Report {
	s := randReportString
	rep := &Report{
		RunID: s(r), Manifest: s(r), Status: RunStatus(s(r)), Noop: r.IntN(2) == 0, HealthCheckOnly: r.IntN(2) == 0,
		Depth: r.IntN(3), DurationMS: r.Int64N(1 << 40), TraceID: s(r),
		Counts:    Counts{Total: r.IntN(9), Changed: r.IntN(9), Stable: r.IntN(9), Failed: r.IntN(9), Skipped: r.IntN(9)},
		RootRunID: s(r), ParentRunID: s(r), Pool: s(r), Trigger: s(r), Assignment: s(r),
		AssignmentVersion: uint64(r.IntN(2)) * r.Uint64(), Coordinator: s(r), Error: s(r),
		PreMessage: s(r), PostMessage: s(r), Offline: r.IntN(2) == 0, ReportedBy: s(r),
	}
	if r.IntN(2) == 0 {
		t := time.Date(2026, 11, 27, 10, 0, r.IntN(60), r.IntN(1e9), time.UTC)
		rep.StartedAt = &t
		u := t.Add(time.Duration(r.IntN(1e9))).In(time.FixedZone("z", 3600))
		rep.FinishedAt = &u
	}
	if r.IntN(3) == 0 {
		rep.Page = &ReportPage{Offset: r.IntN(10), Count: r.IntN(10), Total: r.IntN(10)}
		if r.IntN(2) == 0 {
			n := r.IntN(10)
			rep.Page.NextOffset = &n
		}
	}
	switch r.IntN(3) {
	case 0:
		rep.NoAnswer = []string{s(r), "host-1"}
	case 1:
		rep.NoAnswer = []string{}
	}
	if r.IntN(5) > 0 {
		rep.Resources = make([]ResourceReport, r.IntN(5))
		for i := range rep.Resources {
			rr := ResourceReport{
				Ref: s(r), Type: s(r), Name: s(r), Alias: s(r), Status: s(r), Noop: r.IntN(2) == 0, Refreshed: r.IntN(2) == 0,
				Message: s(r), Error: s(r), DurationMS: r.Int64N(1000), Worker: s(r), Attempts: r.IntN(3), Pool: s(r),
				ChildRunID: s(r), Diff: s(r),
			}
			if r.IntN(3) == 0 {
				rr.HealthChecks = []bus.HealthCheck{{Name: s(r), Status: "OK", Output: s(r), Tries: r.IntN(3), Ignored: r.IntN(2) == 0}}
			}
			if depth < 2 && r.IntN(4) == 0 {
				rr.Child = randReport(r, depth+1)
			}
			rep.Resources[i] = rr
		}
	}
	return rep
}

// TestReportCodecMatchesEncodingJSON: marshalReport writes json.Marshal's
// bytes and decodeReport reads them (and mutated copies of them) as
// json.Unmarshal does, over every field and nested child reports.
func TestReportCodecMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	alphabet := []byte("{}[]:,\"\\ 0123456789.e-aflnrstu\xff")
	for i := range 1500 {
		rep := randReport(r, 0)
		want, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshalReport(rep)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("report %d: marshalReport (%v)\n%s\njson.Marshal\n%s", i, err, got, want)
		}
		var fast Report
		if !readReport(bus.NewJSONReader(want), &fast, false) {
			t.Fatalf("report %d: the fast decoder refused json.Marshal's encoding:\n%s", i, want)
		}
		data := append([]byte(nil), want...)
		if i%2 == 1 {
			p := r.IntN(len(data))
			data[p] = alphabet[r.IntN(len(alphabet))]
		}
		var a, b Report
		errA, errB := decodeReport(data, &a), json.Unmarshal(data, &b)
		if (errA != nil) != (errB != nil) || errA == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("report %d: decodeReport (%v)\n%#v\njson.Unmarshal (%v)\n%#v\nof\n%s", i, errA, a, errB, b, data)
		}
	}
}

// TestReportCodecDocs: hand-written reports read as encoding/json reads
// them: unknown fields, case-folded keys, nulls, wrong types.
func TestReportCodecDocs(t *testing.T) {
	for _, doc := range []string{
		`{}`,
		`{"run_id":"r","resources":null,"counts":null,"page":null,"started_at":null}`,
		`{"run_id":"r","resources":[],"no_answer":[],"extra":{"x":[1,2]}}`,
		`{"RUN_ID":"r"}`,
		`{"counts":{"total":2,"Total":3}}`,
		`{"resources":[{"ref":"a","child":{"run_id":"c","resources":[{"child":null}]}},null]}`,
		`{"resources":[{"duration_ms":1.5}]}`,
		`{"assignment_version":-1}`,
		`{"assignment_version":18446744073709551615}`,
		`{"started_at":"2026-11-27T10:00:00Z","finished_at":"not a time"}`,
		`{"page":{"offset":1,"next_offset":null}}`,
		`{"page":{"offset":1,"next_offset":3}}`,
		`{"resources":[{"health_checks":[{"name":"h","tries":2},null]}]}`,
		`{"run_id":"r"} x`,
	} {
		var a, b Report
		errA, errB := decodeReport([]byte(doc), &a), json.Unmarshal([]byte(doc), &b)
		if (errA != nil) != (errB != nil) || errA == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: decodeReport (%v) %#v, json.Unmarshal (%v) %#v", doc, errA, a, errB, b)
		}
	}
}

// TestReportCodecManyResources: a report of more lines than the decoder
// samples before it makes room for the rest (short and long lines, null
// lines, children) is read as encoding/json reads it.
func TestReportCodecManyResources(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{reportSample - 1, reportSample, reportSample + 1, 100, 1000} {
		rep := randReport(r, 0)
		rep.Resources = nil
		for i := range n {
			rr := ResourceReport{Ref: fmt.Sprintf("file#/f%d", i), Status: "stable"}
			if i%7 == 0 {
				rr.Diff = strings.Repeat("+x\n", i%50)
			}
			if i == 3*n/4 {
				rr.Child = randReport(r, 1)
			}
			rep.Resources = append(rep.Resources, rr)
		}
		data, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		// null lines among them, as encoding/json reads them (zero lines)
		data = bytes.Replace(data, []byte(`{"ref":"file#/f5",`), []byte(`null,{"ref":"file#/f5",`), 1)
		var a, b Report
		errA, errB := decodeReport(data, &a), json.Unmarshal(data, &b)
		if errA != nil || errB != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("%d resources: decodeReport (%v), json.Unmarshal (%v): differ", n, errA, errB)
		}
		if !readReport(bus.NewJSONReader(data), new(Report), false) {
			t.Fatalf("%d resources: the fast decoder refused it", n)
		}
	}
}

// TestReportCodecTimeOutOfRange: a time json.Marshal refuses is refused
// alike (marshalReport falls back to it).
func TestReportCodecTimeOutOfRange(t *testing.T) {
	bad := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := marshalReport(&Report{StartedAt: &bad})
	if _, want := json.Marshal(&Report{StartedAt: &bad}); err == nil || want == nil || !strings.Contains(err.Error(), "year") {
		t.Fatalf("marshalReport: %v; json.Marshal: %v", err, want)
	}
}

func BenchmarkReportCodec(b *testing.B) {
	rep := &Report{RunID: "20261127T100000Z-0a1b2c3d4e", Manifest: "manifest.yaml", Status: RunSucceeded, Counts: Counts{Total: 20000, Stable: 20000}}
	for i := range 20000 {
		ref := "file#/tmp/bench/files/f" + strings.Repeat("0", 6) + ".conf"
		rep.Resources = append(rep.Resources, ResourceReport{Ref: ref, Type: "file", Name: ref[5:], Status: "stable", Worker: "host-1", Attempts: 1, Pool: "default", DurationMS: int64(i % 2)})
	}
	data, _ := json.Marshal(rep)
	b.Run("encode/fast", func(b *testing.B) {
		for b.Loop() {
			_, _ = marshalReport(rep)
		}
	})
	b.Run("encode/encoding-json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(rep)
		}
	})
	b.Run("decode/fast", func(b *testing.B) {
		for b.Loop() {
			var r Report
			_ = decodeReport(data, &r)
		}
	})
	b.Run("decode/encoding-json", func(b *testing.B) {
		for b.Loop() {
			var r Report
			_ = json.Unmarshal(data, &r)
		}
	})
}

// TestFanOutReportDecodeIsLinear: decoding a fan-out's report (every
// host's child report nested) allocates in proportion to the report, at
// 100 hosts as at 1,000. Each child's resource lines used to be given room
// for the rest of the whole document: 3 GB allocated for the 6 MB report
// of 1,000 hosts, quadratic in the hosts (`manifold status --output json`
// of a 10,000-host fan-out took 48-78 s of the client's CPU; issue 19).
func TestFanOutReportDecodeIsLinear(t *testing.T) {
	perByte := map[int]float64{}
	for _, hosts := range []int{100, 1000} {
		data, err := marshalReport(fanOutReport(hosts, 20))
		if err != nil {
			t.Fatal(err)
		}
		var rep Report
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err = decodeReport(data, &rep)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Resources) != hosts || len(rep.Resources[hosts-1].Child.Resources) != 20 {
			t.Fatalf("%d hosts: decoded %d hosts", hosts, len(rep.Resources))
		}
		perByte[hosts] = float64(after.TotalAlloc-before.TotalAlloc) / float64(len(data))
		t.Logf("%d hosts: report %d bytes, decoding allocated %.2f bytes a byte", hosts, len(data), perByte[hosts])
		// A resource line is some 150 bytes of JSON and 250 of
		// ResourceReport, its strings interned or shared with the data.
		if perByte[hosts] > 5 {
			t.Errorf("%d hosts: decoding allocated %.1f bytes per byte of report, want at most 5", hosts, perByte[hosts])
		}
	}
	if perByte[1000] > 1.5*perByte[100] {
		t.Errorf("bytes allocated per byte of report: %.2f at 100 hosts, %.2f at 1,000: not linear", perByte[100], perByte[1000])
	}
}

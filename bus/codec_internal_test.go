package bus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/manifold-run/manifold/schemas"
)

// codecStrings are texts that exercise a JSON string's encoding: escapes,
// HTML characters, control characters, multi-byte UTF-8, invalid UTF-8,
// the line separators json.Marshal escapes, a lone surrogate's bytes.
var codecStrings = []string{
	"", "a", "file#/tmp/x", "run-20261127T100000Z-0a1b2c", `quote " and \ backslash`, "tab\tnew\nline\r",
	"<html> & 'amp'", "\x00\x01\x1f\x7f", "é ü 日本語 🚀", "\xff\xfe invalid", "a\u2028b\u2029c",
	"\xed\xa0\x80 surrogate bytes", strings.Repeat("long ", 100), "--- a\n+++ b\n@@\n-old\n+new\n", "/", "\b\f",
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func randString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return ""
	}
	return pick(r, codecStrings)
}

func randStrings(r *rand.Rand) []string {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	s := make([]string, 1+r.IntN(3))
	for i := range s {
		s[i] = randString(r)
	}
	return s
}

// randAny returns a value as encoding/json decodes one into an any.
func randAny(r *rand.Rand, depth int) any {
	n := 7
	if depth > 3 {
		n = 5
	}
	switch r.IntN(n) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return pick(r, []float64{0, 1, -1, 0.5, 1e21, 1e-7, 123456789, math.MaxInt64, -2.5e-300, 3.14159, math.MaxFloat64})
	case 3, 4:
		return randString(r)
	case 5:
		return randMap(r, depth+1)
	default:
		s := make([]any, r.IntN(4))
		for i := range s {
			s[i] = randAny(r, depth+1)
		}
		return s
	}
}

func randMap(r *rand.Rand, depth int) map[string]any {
	if r.IntN(5) == 0 {
		return nil
	}
	m := map[string]any{}
	for range r.IntN(5) {
		m[randString(r)] = randAny(r, depth)
	}
	return m
}

func randMaps(r *rand.Rand) []map[string]any {
	if r.IntN(2) == 0 {
		return nil
	}
	s := make([]map[string]any, 1+r.IntN(2))
	for i := range s {
		s[i] = randMap(r, 1)
	}
	return s
}

func randAssume(r *rand.Rand) *Assume {
	if r.IntN(2) == 0 {
		return nil
	}
	a := &Assume{Users: randStrings(r), Groups: randStrings(r), Packages: randStrings(r)}
	if r.IntN(2) == 0 {
		a.Directories = map[string]string{randString(r): randString(r), "/srv": "0755"}
	}
	return a
}

func randResource(r *rand.Rand) schemas.Resource {
	res := schemas.Resource{
		Type: pick(r, []string{"file", "exec", "package", ""}), Name: randString(r), Alias: randString(r),
		Ensure: randString(r), Provider: randString(r), Require: randStrings(r), Subscribe: randStrings(r),
		HealthChecks: randMaps(r), RegisterWhenStable: randMaps(r), Target: randString(r),
		Timeout: time.Duration(r.Int64N(1e12)) * time.Duration(r.IntN(2)), Retry: r.IntN(3) - 1,
		AutoRequire: randStrings(r), AutoSkipped: randStrings(r), Properties: randMap(r, 0),
		Pos: schemas.Position{File: randString(r), Line: r.IntN(100), Column: r.IntN(3)}, Path: randString(r),
	}
	if r.IntN(3) == 0 {
		res.Control = &schemas.Control{If: randString(r), Unless: randString(r)}
	}
	if r.IntN(3) == 0 {
		b := r.IntN(2) == 0
		res.AutoEdge = &b
	}
	return res
}

func randTask(r *rand.Rand) Task {
	t := Task{
		V: pick(r, []int{1, 1, 0, 2}), RunID: randString(r), RootRunID: randString(r), Task: r.IntN(100000) - 1,
		Attempt: r.IntN(5), Manifest: randString(r), Resource: randResource(r), Data: randMap(r, 0),
		Noop: r.IntN(2) == 0, HealthCheckOnly: r.IntN(2) == 0, Refresh: r.IntN(2) == 0, Subscribers: randStrings(r),
		WorkDir: randString(r), Bundle: randString(r), Entry: randString(r), Pool: randString(r),
		TimeoutMS: r.Int64N(1 << 40), ContinueAfterFailure: r.IntN(2) == 0, Ref: randString(r),
		Resumed: r.IntN(2) == 0, Token: randString(r), SegmentTokens: randStrings(r), Assignment: randString(r),
		Assume: randAssume(r), BatchOutcomes: r.IntN(2) == 0,
	}
	if r.IntN(4) > 0 {
		t.Deadline = time.Date(2026, 11, 27, 10, r.IntN(60), r.IntN(60), r.IntN(1e9), pick(r, []*time.Location{time.UTC, time.FixedZone("x", 3600), time.FixedZone("y", -5*3600-1800)}))
	}
	if r.IntN(3) > 0 {
		t.Segment = make([]SegmentItem, r.IntN(4))
		for i := range t.Segment {
			t.Segment[i] = SegmentItem{
				Task: r.IntN(1000), Attempt: r.IntN(3), Resource: randResource(r), Refresh: r.IntN(2) == 0,
				TimeoutMS: r.Int64N(1e6), Traceparent: randString(r), Token: randString(r),
				Subscribers: randStrings(r), Assume: randAssume(r),
			}
			switch r.IntN(3) {
			case 0:
				t.Segment[i].Requires = []int{}
			case 1:
				t.Segment[i].Requires = []int{r.IntN(10), -r.IntN(10)}
			}
		}
	}
	return t
}

func randOutcome(r *rand.Rand, depth int) Outcome {
	o := Outcome{
		V: pick(r, []int{1, 1, 0}), RunID: randString(r), Task: r.IntN(100000) - 1, Attempt: r.IntN(4), Ref: randString(r),
		Status: pick(r, []TaskStatus{TaskChanged, TaskStable, TaskFailed, ""}), Changed: r.IntN(2) == 0,
		Refreshed: r.IntN(2) == 0, Message: randString(r), Diff: randString(r), Error: randString(r),
		DurationMS: r.Int64N(1 << 50), Worker: randString(r), Delivery: r.IntN(4), Replayed: r.IntN(2) == 0,
		Kind: pick(r, []FactKind{FactOutcome, FactDeadline, FactBatch}), MAC: randString(r),
	}
	if r.IntN(3) == 0 {
		o.HealthChecks = make([]HealthCheck, r.IntN(3))
		for i := range o.HealthChecks {
			o.HealthChecks[i] = HealthCheck{Name: randString(r), Status: randString(r), Output: randString(r), Tries: r.IntN(5), Ignored: r.IntN(2) == 0}
		}
	}
	if depth == 0 && r.IntN(2) == 0 {
		o.Outcomes = make([]Outcome, r.IntN(5))
		for i := range o.Outcomes {
			o.Outcomes[i] = randOutcome(r, depth+1)
		}
	}
	return o
}

// checkDecode decodes data with the fast decoder of v's type and with
// encoding/json; when the fast one takes it, encoding/json must take it
// too and give the same value. It reports whether the fast one took it.
func checkDecode[T any](t *testing.T, data []byte, fast func([]byte, *T) bool) bool {
	t.Helper()
	var got, want T
	ok := fast(data, &got)
	err := json.Unmarshal(data, &want)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("fast decoder took what encoding/json refuses (%v):\n%s", err, data)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded differently:\n%s\nfast: %#v\njson: %#v", data, got, want)
	}
	return true
}

// TestCodecMatchesEncodingJSON: what json.Marshal encodes, the decoders
// read as json.Unmarshal does, over every field (random values: unicode,
// escapes, invalid UTF-8, empty and absent fields, nested data), and
// MarshalOutcome writes json.Marshal's bytes; a message of either writer
// is read alike by either reader, old peers and new.
func TestCodecMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		task := randTask(r)
		data, err := json.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		if !checkDecode(t, data, decodeTaskFast) {
			t.Fatalf("task %d: fast decoder refused json.Marshal's encoding:\n%s", i, data)
		}
		if got, err := MarshalTask(&task); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("task %d: MarshalTask (%v)\n%s\njson.Marshal\n%s", i, err, got, data)
		}
		o := randOutcome(r, 0)
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := MarshalOutcome(&o); !bytes.Equal(got, want) {
			t.Fatalf("outcome %d: MarshalOutcome\n%s\njson.Marshal\n%s", i, got, want)
		}
		if !checkDecode(t, want, decodeOutcomeFast) {
			t.Fatalf("outcome %d: fast decoder refused json.Marshal's encoding:\n%s", i, want)
		}
		// Through Decode and encode, as the bus uses them.
		var back Outcome
		if err := decodeOutcome(MarshalOutcome(&o), &back); (err != nil) != (o.V > 1) {
			t.Fatalf("outcome %d: Decode: %v", i, err)
		}
	}
}

// TestMarshalTaskOtherValues: values a decoded message never holds but a
// compiled manifest may (integers, other types) are encoded as json.Marshal
// encodes them, and what it refuses is refused.
func TestMarshalTaskOtherValues(t *testing.T) {
	for _, v := range []any{
		1, int64(-7), math.MaxInt64, uint8(3), []string{"a", "<b>"}, map[string]string{"k": "v"},
		json.Number("12.50"), json.RawMessage(`{"x":1}`), time.Unix(0, 0).UTC(), struct{ A int }{1},
		map[string]any{"n": []any{1, 2.5, nil, map[string]any{}}}, []any{}, map[string]any(nil), []any(nil),
		1e20, 1e21, 1e-6, 1e-7, -0.0, 123456789.125, 5e-324,
	} {
		task := Task{V: 1, RunID: "r", Resource: schemas.Resource{Type: "file", Name: "/x", Properties: map[string]any{"v": v}},
			Data: map[string]any{"v": v}, Segment: []SegmentItem{{Task: 1, Resource: schemas.Resource{HealthChecks: []map[string]any{{"v": v}, nil}}}}}
		want, werr := json.Marshal(task)
		got, err := MarshalTask(&task)
		if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("%T %v: MarshalTask (%v)\n%s\njson.Marshal (%v)\n%s", v, v, err, got, werr, want)
		}
	}
	for _, v := range []any{math.NaN(), math.Inf(1), func() {}} {
		task := Task{Data: map[string]any{"v": v}}
		if _, err := MarshalTask(&task); err == nil {
			t.Fatalf("%T: MarshalTask took what json.Marshal refuses", v)
		}
	}
	bad := Task{Deadline: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := MarshalTask(&bad); err == nil {
		t.Fatal("MarshalTask took a deadline json.Marshal refuses")
	}
}

// codecDocs are hand-written messages: every kind of JSON the decoders
// may meet, valid or not; each is decoded as a task and as an outcome.
var codecDocs = []string{
	`{}`,
	`null`,
	`[]`,
	`{"v":1}`,
	` { "v" : 1 , "run_id" : "r" } `,
	"{\"v\":1,\n\t\"task\":3}\n",
	`{"v":1,"unknown":{"a":[1,2,{"b":null}],"c":"\u00e9"},"run_id":"r"}`,
	`{"V":1,"RUN_ID":"r","Task":4}`,
	`{"run_id":"a","Run_Id":"b"}`,
	`{"run_\u0069d":"escaped key"}`,
	`{"run_id":"r","run_id":"again"}`,
	`{"resource":{"properties":{"a":1},"properties":{"b":2}}}`,
	`{"task":"3"}`,
	`{"task":3.0}`,
	`{"task":1e2}`,
	`{"task":-0}`,
	`{"task":9223372036854775807}`,
	`{"task":9223372036854775808}`,
	`{"task":null,"run_id":null,"noop":null,"segment":null,"data":null,"assume":null,"deadline":null}`,
	`{"noop":1}`,
	`{"noop":true,"resumed":false}`,
	`{"run_id":"\ud83d\ude80 \ud83d x \udc00 \u0000 \/ \b\f\n\r\t \" \\"}`,
	`{"run_id":"bad \x escape"}`,
	`{"run_id":"bad \u12g4"}`,
	"{\"run_id\":\"raw\x01control\"}",
	"{\"run_id\":\"invalid \xff\xfe utf8 \xed\xa0\x80\"}",
	`{"run_id":"unterminated}`,
	`{"run_id":"r",}`,
	`{"run_id":"r"} trailing`,
	`{"run_id":"r"}{}`,
	`{"deadline":"2026-11-27T10:00:00Z"}`,
	`{"deadline":"2026-11-27T10:00:00.123456789+05:30"}`,
	`{"deadline":"27 Nov 2026"}`,
	`{"deadline":5}`,
	`{"data":{"n":1.5e300,"big":1e400}}`,
	`{"data":{"n":-0.0,"e":1E+2,"f":01}}`,
	`{"data":{"a":[],"b":{},"c":[null,true,false,"x",1,{"d":[[]]}]}}`,
	`{"data":{"dup":1,"dup":"two"}}`,
	`{"data":{"\u00e9":"key escaped","é":"key raw"}}`,
	`{"data":[1]}`,
	`{"resource":{"type":"file","name":"/x","timeout":1000000000,"autoedge":false,"control":{"if":"a","unless":"b"},"pos":{"file":"m.yaml","line":3,"column":7},"health_checks":[{"command":"true"},null],"register_when_stable":[]}}`,
	`{"resource":{"timeout":1.5}}`,
	`{"resource":{"autoedge":null,"control":null,"pos":null}}`,
	`{"resource":null}`,
	`{"segment":[{"task":1,"attempt":1,"resource":{"type":"file","name":"a"},"requires":[0,null,2],"assume":{"directories":{"/a":"0755","/b":null},"users":["u"]}},null,{}]}`,
	`{"segment":[{"requires":[1.5]}]}`,
	`{"segment":{}}`,
	`{"subscribers":["a",null,"b"],"segment_tokens":[]}`,
	`{"subscribers":"a"}`,
	`{"assume":{"directories":{"/a":1}}}`,
	`{"assume":{"Users":["x"]}}`,
	`{"outcomes":[{"task":1,"status":"stable","health_checks":[{"name":"h","tries":2,"ignored":true},null]},null,{"outcomes":[{"task":2}]}],"kind":"batch"}`,
	`{"outcomes":[{"task":"x"}]}`,
	`{"health_checks":{"name":"h"}}`,
	`{"kind":"batch","run_id":"r","outcomes":[]}`,
	`{"changed":true,"replayed":true,"refreshed":false,"duration_ms":12,"delivery":2}`,
	`{"ſtatus":"long s","\u212aind":"kelvin"}`,
	`{"status":"ok","STATUS":"upper"}`,
	strings.Repeat(`{"data":`, 600) + `1` + strings.Repeat(`}`, 600),
	`{"data":` + strings.Repeat(`[`, 600) + strings.Repeat(`]`, 600) + `}`,
	`{"v":2,"run_id":"r"}`,
	`{"v":"1"}`,
	``,
	`   `,
	`{"run_id":"r"`,
	`{"run_id" "r"}`,
	`{run_id:"r"}`,
	`{"data":{"a":tru}}`,
	`{"data":{"a":nul}}`,
	`{"data":{"a":-}}`,
	`{"data":{"a":1.}}`,
	`{"data":{"a":.5}}`,
	`{"data":{"a":1e}}`,
	`{"data":{1:2}}`,
}

// TestCodecDocsMatchEncodingJSON: on every hand-written document, Decode
// gives what encoding/json gives (value, or an error where it errs), and
// the fast decoders never take what encoding/json would read otherwise.
func TestCodecDocsMatchEncodingJSON(t *testing.T) {
	fastTasks, fastOutcomes := 0, 0
	for _, doc := range codecDocs {
		data := []byte(doc)
		if checkDecode(t, data, decodeTaskFast) {
			fastTasks++
		}
		if checkDecode(t, data, decodeOutcomeFast) {
			fastOutcomes++
		}
		compareDecode[Task](t, data)
		compareDecode[Outcome](t, data)
	}
	t.Logf("fast: %d tasks, %d outcomes of %d", fastTasks, fastOutcomes, len(codecDocs))
	// The fast path is the common one, not a stub that always declines.
	if fastTasks < 20 || fastOutcomes < 15 {
		t.Fatalf("fast decoders took %d task and %d outcome documents of %d", fastTasks, fastOutcomes, len(codecDocs))
	}
}

// compareDecode checks Decode against encoding/json plus the version
// check: same error or not, same value.
func compareDecode[T any](t *testing.T, data []byte) {
	t.Helper()
	var got, want T
	var gotErr error
	switch g := any(&got).(type) {
	case *Task:
		gotErr = DecodeTask(data, g)
	case *Outcome:
		gotErr = decodeOutcome(data, g)
	}
	wantErr := json.Unmarshal(data, &want)
	if wantErr == nil {
		if v := reflect.ValueOf(want).FieldByName("V").Int(); v != 0 && v != Version {
			wantErr = fmt.Errorf("version %d", v)
		}
	}
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("%T %q: Decode error %v, encoding/json %v", got, data, gotErr, wantErr)
	}
	if gotErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%T %q: Decode\n%#v\nencoding/json\n%#v", got, data, got, want)
	}
}

// TestCodecMutations: encodings of random messages, cut and altered at
// random bytes, are read by Decode exactly as encoding/json reads them.
func TestCodecMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("{}[]:,\"\\ \n0123456789.eE+-aeflnrstu\x00\x7f\xc3\xa9\xff")
	for i := range 2000 {
		var data []byte
		if i%2 == 0 {
			data, _ = json.Marshal(randTask(r))
		} else {
			data, _ = json.Marshal(randOutcome(r, 0))
		}
		for range 1 + r.IntN(3) {
			p := r.IntN(len(data) + 1)
			switch r.IntN(3) {
			case 0: // insert
				data = append(data[:p], append([]byte{pick(r, alphabet)}, data[p:]...)...)
			case 1: // delete
				if p < len(data) {
					data = append(data[:p], data[p+1:]...)
				}
			default: // replace
				if p < len(data) {
					data[p] = pick(r, alphabet)
				}
			}
		}
		checkDecode(t, data, decodeTaskFast)
		checkDecode(t, data, decodeOutcomeFast)
		compareDecode[Task](t, data)
		compareDecode[Outcome](t, data)
	}
}

// TestDecodeIntoUsedValue: a value that is not zero is decoded by
// encoding/json (which merges into it), as before.
func TestDecodeIntoUsedValue(t *testing.T) {
	got := Task{RunID: "kept", Data: map[string]any{"old": 1.0}}
	if err := DecodeTask([]byte(`{"v":1,"task":2,"data":{"new":2}}`), &got); err != nil {
		t.Fatal(err)
	}
	want := Task{V: 1, RunID: "kept", Task: 2, Data: map[string]any{"old": 1.0, "new": 2.0}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

// FuzzCodec: go test -fuzz FuzzCodec ./bus/ explores more documents.
func FuzzCodec(f *testing.F) {
	for _, doc := range codecDocs {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data, decodeTaskFast)
		checkDecode(t, data, decodeOutcomeFast)
		compareDecode[Task](t, data)
		compareDecode[Outcome](t, data)
	})
}

// benchSegment is a segment task as a coordinator sends one for 256
// converged files of e2e/bench's manifest.
func benchSegment() Task {
	res := func(i int) schemas.Resource {
		return schemas.Resource{Type: "file", Name: fmt.Sprintf("/tmp/bench/files/f%06d.conf", i), Ensure: "present",
			Properties: map[string]any{"content": "{{ lookup('data.greeting') }} from file " + fmt.Sprint(i) + "\n", "owner": "root", "group": "root", "mode": "0644"},
			Pos:        schemas.Position{File: "manifest.yaml", Line: 5 + 2*i, Column: 11}, Path: fmt.Sprintf("resources[0].file[%d]", i)}
	}
	t := Task{V: 1, RunID: "20261127T100000Z-0a1b2c3d4e", Task: 0, Attempt: 1, Manifest: "manifest.yaml", Resource: res(0),
		Data: map[string]any{"greeting": "hello"}, Pool: "default", TimeoutMS: 600000, Deadline: time.Date(2026, 11, 27, 10, 10, 0, 123456789, time.UTC),
		Token: strings.Repeat("ab", 32), ContinueAfterFailure: true, BatchOutcomes: true, WorkDir: "/tmp/bench"}
	for i := 1; i < 256; i++ {
		t.Segment = append(t.Segment, SegmentItem{Task: i, Attempt: 1, Resource: res(i), TimeoutMS: 600000,
			Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", Token: strings.Repeat("cd", 32)})
	}
	return t
}

func BenchmarkDecodeSegment(b *testing.B) {
	data, _ := json.Marshal(benchSegment())
	b.SetBytes(int64(len(data)))
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var t Task
			if err := DecodeTask(data, &t); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var t Task
			if err := json.Unmarshal(data, &t); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkEncodeSegment(b *testing.B) {
	t := benchSegment()
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := MarshalTask(&t); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(t); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkOutcomeBatch(b *testing.B) {
	batch := Outcome{V: 1, Kind: FactBatch, RunID: "20261127T100000Z-0a1b2c3d4e"}
	for i := range 256 {
		batch.Outcomes = append(batch.Outcomes, Outcome{V: 1, RunID: batch.RunID, Task: i, Attempt: 1, Ref: fmt.Sprintf("file#/tmp/bench/files/f%06d.conf", i),
			Status: TaskStable, DurationMS: 0, Worker: "host-1", Delivery: 1, MAC: strings.Repeat("ef", 32)})
	}
	data, _ := json.Marshal(batch)
	b.Run("decode/fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var o Outcome
			if err := decodeOutcome(data, &o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var o Outcome
			if err := json.Unmarshal(data, &o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode-each/fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range batch.Outcomes {
				MarshalOutcome(&batch.Outcomes[i])
			}
		}
	})
	b.Run("encode-each/encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i := range batch.Outcomes {
				_, _ = json.Marshal(batch.Outcomes[i])
			}
		}
	})
}

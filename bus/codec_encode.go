package bus

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/manifold-run/manifold/schemas"
)

// MarshalOutcome returns o's JSON encoding: the bytes json.Marshal gives
// (TestCodecMatchesEncodingJSON), without its reflection. A worker
// encodes an outcome per resource.
func MarshalOutcome(o *Outcome) []byte {
	return o.appendJSON(make([]byte, 0, o.sizeHint()))
}

func (o *Outcome) sizeHint() int {
	n := 192 + len(o.RunID) + len(o.Ref) + len(o.Message) + len(o.Diff) + len(o.Error) + len(o.Worker) + len(o.MAC)
	for i := range o.HealthChecks {
		n += 64 + len(o.HealthChecks[i].Name) + len(o.HealthChecks[i].Output)
	}
	for i := range o.Outcomes {
		n += o.Outcomes[i].sizeHint()
	}
	return n
}

func (o *Outcome) appendJSON(buf []byte) []byte {
	buf = append(buf, `{"v":`...)
	buf = strconv.AppendInt(buf, int64(o.V), 10)
	buf = appendStr(buf, `,"run_id":`, o.RunID, false)
	buf = append(buf, `,"task":`...)
	buf = strconv.AppendInt(buf, int64(o.Task), 10)
	buf = append(buf, `,"attempt":`...)
	buf = strconv.AppendInt(buf, int64(o.Attempt), 10)
	buf = appendStr(buf, `,"ref":`, o.Ref, false)
	buf = appendStr(buf, `,"status":`, string(o.Status), false)
	buf = appendJSONBool(buf, `,"changed":`, o.Changed, false)
	buf = appendJSONBool(buf, `,"refreshed":`, o.Refreshed, true)
	buf = appendStr(buf, `,"message":`, o.Message, true)
	buf = appendStr(buf, `,"diff":`, o.Diff, true)
	buf = appendStr(buf, `,"error":`, o.Error, true)
	buf = append(buf, `,"duration_ms":`...)
	buf = strconv.AppendInt(buf, o.DurationMS, 10)
	buf = appendStr(buf, `,"worker":`, o.Worker, false)
	buf = append(buf, `,"delivery":`...)
	buf = strconv.AppendInt(buf, int64(o.Delivery), 10)
	buf = appendJSONBool(buf, `,"replayed":`, o.Replayed, true)
	if len(o.HealthChecks) > 0 {
		buf = append(buf, `,"health_checks":[`...)
		for i := range o.HealthChecks {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendHealthCheck(buf, &o.HealthChecks[i])
		}
		buf = append(buf, ']')
	}
	buf = appendStr(buf, `,"kind":`, string(o.Kind), true)
	buf = appendStr(buf, `,"mac":`, o.MAC, true)
	if len(o.Outcomes) > 0 {
		buf = append(buf, `,"outcomes":[`...)
		for i := range o.Outcomes {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = o.Outcomes[i].appendJSON(buf)
		}
		buf = append(buf, ']')
	}
	return append(buf, '}')
}

// appendJSONBool appends name and v (nothing when omitEmpty and v is
// false).
func appendJSONBool(buf []byte, name string, v, omitEmpty bool) []byte {
	switch {
	case v:
		return append(append(buf, name...), "true"...)
	case omitEmpty:
		return buf
	}
	return append(append(buf, name...), "false"...)
}

// encodeFast encodes the messages sent once per resource by hand, the
// others with encoding/json.
func encodeFast(v any) ([]byte, bool) {
	switch m := v.(type) {
	case Outcome:
		return MarshalOutcome(&m), true
	case *Outcome:
		return MarshalOutcome(m), true
	case Task:
		data, err := MarshalTask(&m)
		return data, err == nil
	}
	return nil, false
}

func appendHealthCheck(buf []byte, h *HealthCheck) []byte {
	buf = appendStr(buf, `{"name":`, h.Name, false)
	buf = appendStr(buf, `,"status":`, h.Status, false)
	buf = appendStr(buf, `,"output":`, h.Output, true)
	buf = append(buf, `,"tries":`...)
	buf = strconv.AppendInt(buf, int64(h.Tries), 10)
	buf = appendJSONBool(buf, `,"ignored":`, h.Ignored, true)
	return append(buf, '}')
}

// appendString appends s as json.Marshal encodes a string: HTML
// characters, control characters, U+2028 and U+2029 escaped, invalid
// UTF-8 bytes as \ufffd.
func appendString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if jsonSafe[b] {
			i++
			continue
		}
		if b < utf8.RuneSelf {
			buf = append(buf, s[start:i]...)
			switch b {
			case '\\', '"':
				buf = append(buf, '\\', b)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// jsonSafe are the bytes json.Marshal writes as they are in a string.
var jsonSafe = func() (safe [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		safe[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return safe
}()

// appendStr appends name and s (nothing when omitEmpty and s is empty).
func appendStr(buf []byte, name, s string, omitEmpty bool) []byte {
	if omitEmpty && s == "" {
		return buf
	}
	return appendString(append(buf, name...), s)
}

func appendInt(buf []byte, name string, v int64, omitEmpty bool) []byte {
	if omitEmpty && v == 0 {
		return buf
	}
	return strconv.AppendInt(append(buf, name...), v, 10)
}

func appendStrings(buf []byte, name string, s []string) []byte {
	if len(s) == 0 {
		return buf
	}
	buf = append(buf, name...)
	buf = append(buf, '[')
	for i, e := range s {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, e)
	}
	return append(buf, ']')
}

// appendAny appends v as json.Marshal encodes it, for the values a
// manifest's data and properties hold; false for any other type (the
// caller then encodes with json.Marshal, which knows them all) and for
// what json.Marshal refuses (NaN, infinities).
func appendAny(buf []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(buf, "null"...), true
	case string:
		return appendString(buf, v), true
	case bool:
		if v {
			return append(buf, "true"...), true
		}
		return append(buf, "false"...), true
	case float64:
		return appendFloat(buf, v)
	case int:
		return strconv.AppendInt(buf, int64(v), 10), true
	case int64:
		return strconv.AppendInt(buf, v, 10), true
	case []any:
		if v == nil {
			return append(buf, "null"...), true
		}
		buf = append(buf, '[')
		for i, e := range v {
			if i > 0 {
				buf = append(buf, ',')
			}
			var ok bool
			if buf, ok = appendAny(buf, e); !ok {
				return buf, false
			}
		}
		return append(buf, ']'), true
	case map[string]any:
		return appendMap(buf, v)
	}
	return buf, false
}

// appendMap appends m with its keys sorted, as json.Marshal does.
func appendMap(buf []byte, m map[string]any) ([]byte, bool) {
	if m == nil {
		return append(buf, "null"...), true
	}
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	buf = append(buf, '{')
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(appendString(buf, k), ':')
		var ok bool
		if buf, ok = appendAny(buf, m[k]); !ok {
			return buf, false
		}
	}
	return append(buf, '}'), true
}

// appendFloat is json.Marshal's float64 encoding (ES6 number to string).
func appendFloat(buf []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return buf, false
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	buf = strconv.AppendFloat(buf, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(buf)
		if n >= 4 && buf[n-4] == 'e' && buf[n-3] == '-' && buf[n-2] == '0' {
			buf[n-2] = buf[n-1]
			buf = buf[:n-1]
		}
	}
	return buf, true
}

// appendAssume appends a's encoding (a not nil).
func appendAssume(buf []byte, a *Assume) []byte {
	buf = append(buf, '{')
	mark := len(buf)
	if len(a.Directories) > 0 {
		buf = append(buf, `"directories":{`...)
		keys := make([]string, 0, len(a.Directories))
		for k := range a.Directories {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(append(appendString(buf, k), ':'), a.Directories[k])
		}
		buf = append(buf, '}')
	}
	buf = appendStrings(buf, `,"users":`, a.Users)
	buf = appendStrings(buf, `,"groups":`, a.Groups)
	buf = appendStrings(buf, `,"packages":`, a.Packages)
	if len(buf) > mark && buf[mark] == ',' {
		buf = append(buf[:mark], buf[mark+1:]...) // no leading comma
	}
	return append(buf, '}')
}

// appendResource appends r's encoding; false when appendAny refuses a
// value of its properties or health checks.
func appendResource(buf []byte, r *schemas.Resource) ([]byte, bool) {
	buf = appendStr(buf, `{"type":`, r.Type, false)
	buf = appendStr(buf, `,"name":`, r.Name, false)
	buf = appendStr(buf, `,"alias":`, r.Alias, true)
	buf = appendStr(buf, `,"ensure":`, r.Ensure, true)
	buf = appendStr(buf, `,"provider":`, r.Provider, true)
	buf = appendStrings(buf, `,"require":`, r.Require)
	buf = appendStrings(buf, `,"subscribe":`, r.Subscribe)
	if c := r.Control; c != nil {
		buf = append(buf, `,"control":{`...)
		mark := len(buf)
		buf = appendStr(buf, `,"if":`, c.If, true)
		buf = appendStr(buf, `,"unless":`, c.Unless, true)
		if len(buf) > mark {
			buf = append(buf[:mark], buf[mark+1:]...)
		}
		buf = append(buf, '}')
	}
	var ok bool
	for _, f := range [...]struct {
		name string
		maps []map[string]any
	}{{`,"health_checks":`, r.HealthChecks}, {`,"register_when_stable":`, r.RegisterWhenStable}} {
		if len(f.maps) == 0 {
			continue
		}
		buf = append(buf, f.name...)
		buf = append(buf, '[')
		for i, m := range f.maps {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, ok = appendMap(buf, m); !ok {
				return buf, false
			}
		}
		buf = append(buf, ']')
	}
	buf = appendStr(buf, `,"target":`, r.Target, true)
	buf = appendInt(buf, `,"timeout":`, int64(r.Timeout), true)
	buf = appendInt(buf, `,"retry":`, int64(r.Retry), true)
	if r.AutoEdge != nil {
		buf = appendJSONBool(buf, `,"autoedge":`, *r.AutoEdge, false)
	}
	buf = appendStrings(buf, `,"auto_require":`, r.AutoRequire)
	buf = appendStrings(buf, `,"auto_skipped":`, r.AutoSkipped)
	if len(r.Properties) > 0 {
		buf = append(buf, `,"properties":`...)
		if buf, ok = appendMap(buf, r.Properties); !ok {
			return buf, false
		}
	}
	buf = append(buf, `,"pos":{`...)
	mark := len(buf)
	buf = appendStr(buf, `,"file":`, r.Pos.File, true)
	buf = appendInt(buf, `,"line":`, int64(r.Pos.Line), true)
	buf = appendInt(buf, `,"column":`, int64(r.Pos.Column), true)
	if len(buf) > mark {
		buf = append(buf[:mark], buf[mark+1:]...)
	}
	buf = append(buf, '}')
	buf = appendStr(buf, `,"path":`, r.Path, true)
	return append(buf, '}'), true
}

// MarshalTask returns json.Marshal(t): by hand for the values a
// manifest's data and properties hold, by json.Marshal otherwise.
func MarshalTask(t *Task) ([]byte, error) {
	if buf, ok := t.appendJSON(make([]byte, 0, 1024)); ok {
		return buf, nil
	}
	return json.Marshal(t)
}

func (t *Task) appendJSON(buf []byte) ([]byte, bool) {
	buf = appendInt(buf, `{"v":`, int64(t.V), false)
	buf = appendStr(buf, `,"run_id":`, t.RunID, false)
	buf = appendStr(buf, `,"root_run_id":`, t.RootRunID, true)
	buf = appendInt(buf, `,"task":`, int64(t.Task), false)
	buf = appendInt(buf, `,"attempt":`, int64(t.Attempt), false)
	buf = appendStr(buf, `,"manifest":`, t.Manifest, true)
	buf = append(buf, `,"resource":`...)
	var ok bool
	if buf, ok = appendResource(buf, &t.Resource); !ok {
		return buf, false
	}
	if len(t.Data) > 0 {
		buf = append(buf, `,"data":`...)
		if buf, ok = appendMap(buf, t.Data); !ok {
			return buf, false
		}
	}
	buf = appendJSONBool(buf, `,"noop":`, t.Noop, true)
	buf = appendJSONBool(buf, `,"health_check_only":`, t.HealthCheckOnly, true)
	buf = appendJSONBool(buf, `,"refresh":`, t.Refresh, true)
	buf = appendStrings(buf, `,"subscribers":`, t.Subscribers)
	buf = appendStr(buf, `,"work_dir":`, t.WorkDir, true)
	buf = appendStr(buf, `,"bundle":`, t.Bundle, true)
	buf = appendStr(buf, `,"entry":`, t.Entry, true)
	buf = appendStr(buf, `,"pool":`, t.Pool, false)
	buf = appendInt(buf, `,"timeout_ms":`, t.TimeoutMS, false)
	deadline, err := t.Deadline.MarshalJSON()
	if err != nil {
		return buf, false
	}
	buf = append(append(buf, `,"deadline":`...), deadline...)
	if len(t.Segment) > 0 {
		buf = append(buf, `,"segment":[`...)
		start := len(buf)
		for i := range t.Segment {
			if i > 0 {
				buf = append(buf, ',')
			}
			if i == 1 {
				// Room for the rest, sized by the first item.
				if want := len(buf) + (len(buf)-start)*(len(t.Segment)-1)*9/8; cap(buf) < want {
					buf = append(make([]byte, 0, want), buf...)
				}
			}
			it := &t.Segment[i]
			buf = appendInt(buf, `{"task":`, int64(it.Task), false)
			buf = appendInt(buf, `,"attempt":`, int64(it.Attempt), false)
			buf = append(buf, `,"resource":`...)
			if buf, ok = appendResource(buf, &it.Resource); !ok {
				return buf, false
			}
			buf = appendJSONBool(buf, `,"refresh":`, it.Refresh, true)
			buf = appendInt(buf, `,"timeout_ms":`, it.TimeoutMS, false)
			buf = appendStr(buf, `,"traceparent":`, it.Traceparent, true)
			if len(it.Requires) > 0 {
				buf = append(buf, `,"requires":[`...)
				for j, r := range it.Requires {
					if j > 0 {
						buf = append(buf, ',')
					}
					buf = strconv.AppendInt(buf, int64(r), 10)
				}
				buf = append(buf, ']')
			}
			buf = appendStr(buf, `,"token":`, it.Token, true)
			buf = appendStrings(buf, `,"subscribers":`, it.Subscribers)
			if it.Assume != nil {
				buf = appendAssume(append(buf, `,"assume":`...), it.Assume)
			}
			buf = append(buf, '}')
		}
		buf = append(buf, ']')
	}
	buf = appendJSONBool(buf, `,"continue_after_failure":`, t.ContinueAfterFailure, true)
	buf = appendStr(buf, `,"ref":`, t.Ref, true)
	buf = appendJSONBool(buf, `,"resumed":`, t.Resumed, true)
	buf = appendStr(buf, `,"token":`, t.Token, true)
	buf = appendStrings(buf, `,"segment_tokens":`, t.SegmentTokens)
	buf = appendStr(buf, `,"assignment":`, t.Assignment, true)
	if t.Assume != nil {
		buf = appendAssume(append(buf, `,"assume":`...), t.Assume)
	}
	buf = appendJSONBool(buf, `,"batch_outcomes":`, t.BatchOutcomes, true)
	return append(buf, '}'), true
}

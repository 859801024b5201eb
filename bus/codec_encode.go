package bus

import "strconv"

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
	buf = appendJSONField(buf, `,"run_id":`, o.RunID, false)
	buf = append(buf, `,"task":`...)
	buf = strconv.AppendInt(buf, int64(o.Task), 10)
	buf = append(buf, `,"attempt":`...)
	buf = strconv.AppendInt(buf, int64(o.Attempt), 10)
	buf = appendJSONField(buf, `,"ref":`, o.Ref, false)
	buf = appendJSONField(buf, `,"status":`, string(o.Status), false)
	buf = appendJSONBool(buf, `,"changed":`, o.Changed, false)
	buf = appendJSONBool(buf, `,"refreshed":`, o.Refreshed, true)
	buf = appendJSONField(buf, `,"message":`, o.Message, true)
	buf = appendJSONField(buf, `,"diff":`, o.Diff, true)
	buf = appendJSONField(buf, `,"error":`, o.Error, true)
	buf = append(buf, `,"duration_ms":`...)
	buf = strconv.AppendInt(buf, o.DurationMS, 10)
	buf = appendJSONField(buf, `,"worker":`, o.Worker, false)
	buf = append(buf, `,"delivery":`...)
	buf = strconv.AppendInt(buf, int64(o.Delivery), 10)
	buf = appendJSONBool(buf, `,"replayed":`, o.Replayed, true)
	if len(o.HealthChecks) > 0 {
		buf = append(buf, `,"health_checks":[`...)
		for i := range o.HealthChecks {
			if i > 0 {
				buf = append(buf, ',')
			}
			h := &o.HealthChecks[i]
			buf = appendJSONField(buf, `{"name":`, h.Name, false)
			buf = appendJSONField(buf, `,"status":`, h.Status, false)
			buf = appendJSONField(buf, `,"output":`, h.Output, true)
			buf = append(buf, `,"tries":`...)
			buf = strconv.AppendInt(buf, int64(h.Tries), 10)
			buf = appendJSONBool(buf, `,"ignored":`, h.Ignored, true)
			buf = append(buf, '}')
		}
		buf = append(buf, ']')
	}
	buf = appendJSONField(buf, `,"kind":`, string(o.Kind), true)
	buf = appendJSONField(buf, `,"mac":`, o.MAC, true)
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
	}
	return nil, false
}

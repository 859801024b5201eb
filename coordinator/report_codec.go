package coordinator

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/manifold-run/manifold/bus"
)

// The run report of a large run holds a line per resource: it is encoded
// once by the coordinator that finishes the run and decoded by every
// reader (`manifold apply` reads it right after). marshalReport and
// decodeReport do it by hand, with json.Marshal's bytes and
// json.Unmarshal's values (TestReportCodecMatchesEncodingJSON); whatever
// the hand-written decoder does not take exactly as encoding/json would is
// decoded by encoding/json (see bus.JSONReader).

// MarshalReport returns json.Marshal(rep)'s bytes, encoded by hand (a
// report of thousands of resources without reflection).
func MarshalReport(rep *Report) ([]byte, error) { return marshalReport(rep) }

// marshalReport returns json.Marshal(rep).
func marshalReport(rep *Report) ([]byte, error) {
	buf, ok := appendReport(make([]byte, 0, reportSizeHint(rep)), rep)
	if !ok {
		return json.Marshal(rep)
	}
	return buf, nil
}

func reportSizeHint(rep *Report) int {
	n := 512
	for i := range rep.Resources {
		r := &rep.Resources[i]
		n += 200 + 2*len(r.Ref) + len(r.Type) + len(r.Alias) + len(r.Status) + len(r.ChildRunID) + len(r.Message) + len(r.Error) + len(r.Worker) + len(r.Pool) + len(r.Diff)
	}
	return n
}

// appendReport appends rep's encoding; false when a time cannot be
// encoded (json.Marshal then says why).
func appendReport(buf []byte, rep *Report) ([]byte, bool) {
	buf = append(buf, `{"run_id":`...)
	buf = bus.AppendJSONString(buf, rep.RunID)
	buf = append(buf, `,"manifest":`...)
	buf = bus.AppendJSONString(buf, rep.Manifest)
	buf = append(buf, `,"status":`...)
	buf = bus.AppendJSONString(buf, string(rep.Status))
	buf = appendBool(buf, `,"noop":`, rep.Noop)
	buf = appendBool(buf, `,"health_check_only":`, rep.HealthCheckOnly)
	buf = appendInt(buf, `,"depth":`, int64(rep.Depth))
	buf = appendInt(buf, `,"duration_ms":`, rep.DurationMS)
	buf = append(buf, `,"trace_id":`...)
	buf = bus.AppendJSONString(buf, rep.TraceID)
	c := &rep.Counts
	buf = appendInt(buf, `,"counts":{"total":`, int64(c.Total))
	buf = appendInt(buf, `,"changed":`, int64(c.Changed))
	buf = appendInt(buf, `,"stable":`, int64(c.Stable))
	buf = appendInt(buf, `,"failed":`, int64(c.Failed))
	buf = appendInt(buf, `,"skipped":`, int64(c.Skipped))
	buf = append(buf, `},"resources":`...)
	if rep.Resources == nil {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, '[')
		for i := range rep.Resources {
			if i > 0 {
				buf = append(buf, ',')
			}
			var ok bool
			if buf, ok = appendResourceReport(buf, &rep.Resources[i]); !ok {
				return nil, false
			}
		}
		buf = append(buf, ']')
	}
	buf = appendStr(buf, `,"root_run_id":`, rep.RootRunID)
	buf = appendStr(buf, `,"parent_run_id":`, rep.ParentRunID)
	buf = appendStr(buf, `,"pool":`, rep.Pool)
	buf = appendStr(buf, `,"trigger":`, rep.Trigger)
	buf = appendStr(buf, `,"assignment":`, rep.Assignment)
	if rep.AssignmentVersion != 0 {
		buf = strconv.AppendUint(append(buf, `,"assignment_version":`...), rep.AssignmentVersion, 10)
	}
	buf = appendStr(buf, `,"coordinator":`, rep.Coordinator)
	buf = appendStr(buf, `,"error":`, rep.Error)
	for _, t := range []struct {
		name string
		t    *time.Time
	}{{`,"started_at":`, rep.StartedAt}, {`,"finished_at":`, rep.FinishedAt}} {
		if t.t == nil {
			continue
		}
		b, err := t.t.MarshalJSON()
		if err != nil {
			return nil, false
		}
		buf = append(append(buf, t.name...), b...)
	}
	buf = appendStr(buf, `,"pre_message":`, rep.PreMessage)
	buf = appendStr(buf, `,"post_message":`, rep.PostMessage)
	if p := rep.Page; p != nil {
		buf = appendInt(buf, `,"page":{"offset":`, int64(p.Offset))
		buf = appendInt(buf, `,"count":`, int64(p.Count))
		buf = appendInt(buf, `,"total":`, int64(p.Total))
		if p.NextOffset != nil {
			buf = appendInt(buf, `,"next_offset":`, int64(*p.NextOffset))
		}
		buf = append(buf, '}')
	}
	if len(rep.NoAnswer) > 0 {
		buf = append(buf, `,"no_answer":[`...)
		for i, w := range rep.NoAnswer {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = bus.AppendJSONString(buf, w)
		}
		buf = append(buf, ']')
	}
	if rep.Offline {
		buf = append(buf, `,"offline":true`...)
	}
	buf = appendStr(buf, `,"reported_by":`, rep.ReportedBy)
	return append(buf, '}'), true
}

func appendResourceReport(buf []byte, r *ResourceReport) ([]byte, bool) {
	buf = append(buf, `{"ref":`...)
	buf = bus.AppendJSONString(buf, r.Ref)
	buf = append(buf, `,"type":`...)
	buf = bus.AppendJSONString(buf, r.Type)
	buf = append(buf, `,"name":`...)
	buf = bus.AppendJSONString(buf, r.Name)
	buf = append(buf, `,"alias":`...)
	buf = bus.AppendJSONString(buf, r.Alias)
	buf = append(buf, `,"status":`...)
	buf = bus.AppendJSONString(buf, r.Status)
	buf = appendBool(buf, `,"noop":`, r.Noop)
	buf = appendBool(buf, `,"refreshed":`, r.Refreshed)
	buf = append(buf, `,"message":`...)
	buf = bus.AppendJSONString(buf, r.Message)
	buf = append(buf, `,"error":`...)
	buf = bus.AppendJSONString(buf, r.Error)
	buf = appendInt(buf, `,"duration_ms":`, r.DurationMS)
	buf = append(buf, `,"worker":`...)
	buf = bus.AppendJSONString(buf, r.Worker)
	buf = append(buf, `,"child":`...)
	if r.Child == nil {
		buf = append(buf, "null"...)
	} else {
		var ok bool
		if buf, ok = appendReport(buf, r.Child); !ok {
			return nil, false
		}
	}
	if r.Attempts != 0 {
		buf = appendInt(buf, `,"attempts":`, int64(r.Attempts))
	}
	buf = appendStr(buf, `,"pool":`, r.Pool)
	if len(r.HealthChecks) > 0 {
		buf = bus.AppendHealthChecks(append(buf, `,"health_checks":`...), r.HealthChecks)
	}
	buf = appendStr(buf, `,"child_run_id":`, r.ChildRunID)
	buf = appendStr(buf, `,"diff":`, r.Diff)
	return append(buf, '}'), true
}

func appendBool(buf []byte, name string, v bool) []byte {
	buf = append(buf, name...)
	if v {
		return append(buf, "true"...)
	}
	return append(buf, "false"...)
}

func appendInt(buf []byte, name string, v int64) []byte {
	return strconv.AppendInt(append(buf, name...), v, 10)
}

// appendStr appends name and s unless s is empty (omitempty).
func appendStr(buf []byte, name, s string) []byte {
	if s == "" {
		return buf
	}
	return bus.AppendJSONString(append(buf, name...), s)
}

// decodeReport is json.Unmarshal(data, rep) for a zero rep.
func decodeReport(data []byte, rep *Report) error {
	var fast Report
	if r := bus.NewJSONReader(data); readReport(r, &fast, false) && r.End() {
		*rep = fast
		return nil
	}
	return json.Unmarshal(data, rep)
}

var reportFields = []string{
	"run_id", "manifest", "status", "noop", "health_check_only", "depth", "duration_ms", "trace_id", "counts",
	"resources", "root_run_id", "parent_run_id", "pool", "trigger", "assignment", "assignment_version",
	"coordinator", "error", "started_at", "finished_at", "pre_message", "post_message", "page", "no_answer",
	"offline", "reported_by",
}

// reportSample is how many resource lines are read before the rest are
// given room.
const reportSample = 16

var (
	countsFields = []string{"total", "changed", "stable", "failed", "skipped"}
	pageFields   = []string{"offset", "count", "total", "next_offset"}
)

// readReport reads a report; nested is set for a child report (under a
// resource's "child"), whose resource lines are not given room ahead.
func readReport(r *bus.JSONReader, rep *Report, nested bool) bool {
	return r.Object(reportFields, func(k int) bool {
		switch k {
		case 0:
			return r.String(&rep.RunID)
		case 1:
			return r.String(&rep.Manifest)
		case 2:
			return r.String((*string)(&rep.Status))
		case 3:
			return r.Bool(&rep.Noop)
		case 4:
			return r.Bool(&rep.HealthCheckOnly)
		case 5:
			return r.Int(&rep.Depth)
		case 6:
			return r.Int64(&rep.DurationMS)
		case 7:
			return r.String(&rep.TraceID)
		case 8:
			if r.Null() {
				return true
			}
			c := &rep.Counts
			return r.Object(countsFields, func(k int) bool {
				return r.Int([]*int{&c.Total, &c.Changed, &c.Stable, &c.Failed, &c.Skipped}[k])
			})
		case 9:
			if r.Null() {
				rep.Resources = nil
				return true
			}
			rep.Resources = []ResourceReport{}
			start := r.Offset()
			return r.Array(func() bool {
				if n := len(rep.Resources); n == reportSample && !nested {
					// Room for the rest at once, estimated from the
					// first lines' size (a report of 20,000 resources
					// grew its slice 15 times).
					// (A line json.Marshal writes takes 137 bytes or more:
					// no more room than the rest could hold.)
					// Only for the outermost report: what follows a
					// child's lines is mostly its fan-out's other
					// children, and room for them in each child made
					// the decoding of a fan-out's report quadratic in its
					// hosts (3 GB allocated and cleared for a 6 MB report
					// of 1,000 hosts, 27 GB for 3,000; issue 19).
					per := max((r.Offset()-start)/n, 128)
					rep.Resources = slices.Grow(rep.Resources, (r.Len()-r.Offset())/per*9/8+1)
				}
				rep.Resources = append(rep.Resources, ResourceReport{})
				return r.Null() || readResourceReport(r, &rep.Resources[len(rep.Resources)-1])
			})
		case 10:
			return r.String(&rep.RootRunID)
		case 11:
			return r.String(&rep.ParentRunID)
		case 12:
			return r.String(&rep.Pool)
		case 13:
			return r.String(&rep.Trigger)
		case 14:
			return r.String(&rep.Assignment)
		case 15:
			return r.Uint64(&rep.AssignmentVersion)
		case 16:
			return r.String(&rep.Coordinator)
		case 17:
			return r.String(&rep.Error)
		case 18:
			return readTimePtr(r, &rep.StartedAt)
		case 19:
			return readTimePtr(r, &rep.FinishedAt)
		case 20:
			return r.String(&rep.PreMessage)
		case 21:
			return r.String(&rep.PostMessage)
		case 22:
			if r.Null() {
				rep.Page = nil
				return true
			}
			p := new(ReportPage)
			rep.Page = p
			return r.Object(pageFields, func(k int) bool {
				switch k {
				case 0:
					return r.Int(&p.Offset)
				case 1:
					return r.Int(&p.Count)
				case 2:
					return r.Int(&p.Total)
				}
				if r.Null() {
					p.NextOffset = nil
					return true
				}
				p.NextOffset = new(int)
				return r.Int(p.NextOffset)
			})
		case 23:
			return r.Strings(&rep.NoAnswer)
		case 24:
			return r.Bool(&rep.Offline)
		case 25:
			return r.String(&rep.ReportedBy)
		}
		return false
	})
}

var resourceReportFields = []string{
	"ref", "type", "name", "alias", "status", "noop", "refreshed", "message", "error", "duration_ms", "worker",
	"child", "attempts", "pool", "health_checks", "child_run_id", "diff",
}

func readResourceReport(r *bus.JSONReader, rr *ResourceReport) bool {
	return r.Object(resourceReportFields, func(k int) bool {
		switch k {
		case 0:
			return r.String(&rr.Ref)
		case 1:
			return r.String(&rr.Type)
		case 2:
			return r.String(&rr.Name)
		case 3:
			return r.String(&rr.Alias)
		case 4:
			return r.String(&rr.Status)
		case 5:
			return r.Bool(&rr.Noop)
		case 6:
			return r.Bool(&rr.Refreshed)
		case 7:
			return r.String(&rr.Message)
		case 8:
			return r.String(&rr.Error)
		case 9:
			return r.Int64(&rr.DurationMS)
		case 10:
			return r.String(&rr.Worker)
		case 11:
			if r.Null() {
				rr.Child = nil
				return true
			}
			rr.Child = new(Report)
			return readReport(r, rr.Child, true)
		case 12:
			return r.Int(&rr.Attempts)
		case 13:
			return r.String(&rr.Pool)
		case 14:
			return r.HealthChecks(&rr.HealthChecks)
		case 15:
			return r.String(&rr.ChildRunID)
		case 16:
			return r.String(&rr.Diff)
		}
		return false
	})
}

// readTimePtr reads a *time.Time field: null is nil.
func readTimePtr(r *bus.JSONReader, t **time.Time) bool {
	if r.Null() {
		*t = nil
		return true
	}
	*t = new(time.Time)
	return r.Time(*t)
}
